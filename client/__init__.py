"""Clients: ``Producer``, ``TransactionProducer``, ``PullConsumer``,
``PushConsumer`` and ``SimpleConsumer`` (share groups).

    from duomq.client import Producer, Message
    with Producer(zookeeper="127.0.0.1:2181", cluster="DefaultCluster") as p:
        result = p.send(Message("Orders", b"hello"))

The names are imported on first use, so that a module of this package
(``duomq.client.remoting`` for the health probes) loads without the rest.
"""

import importlib

_HOME = {
    "PullConsumer": "consumer", "PullResult": "consumer", "PullStatus": "consumer",
    "Producer": "producer", "SendResult": "producer", "SendStatus": "producer",
    "PushConsumer": "push_consumer",
    "SimpleConsumer": "simple_consumer", "ReceivedMessage": "simple_consumer",
    "TransactionProducer": "transaction_producer",
    "TransactionSendResult": "transaction_producer",
    "TransactionState": "duomq.common.transaction",
    "ConsumerConfig": "duomq.common.client_config",
    "ProducerConfig": "duomq.common.client_config",
    "SimpleConsumerConfig": "duomq.common.client_config",
    "Message": "duomq.common.message", "MessageExt": "duomq.common.message",
    "MessageQueue": "duomq.common.message",
}

__all__ = list(_HOME)


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home if "." in home else f"{__name__}.{home}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
