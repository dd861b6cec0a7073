"""Clients: ``Producer``, ``TransactionProducer``, ``PullConsumer``,
``PushConsumer`` and ``SimpleConsumer`` (share groups), each taking its
group first and everything else by keyword (``client.shape``), and the
errors a caller handles (``TopicNotExistError``, ``RequestTimeoutError``,
... all of ``duomq.common.errors``, under ``DuomqError``).

    from duomq.client import Message, Producer, TopicNotExistError
    with Producer(zookeeper="127.0.0.1:2181", cluster="DefaultCluster") as p:
        result = p.send(Message("Orders", b"hello"))

The names are imported on first use, so that a module of this package
(``duomq.client.remoting`` for the health probes) loads without the rest.
"""

import importlib

_HOME = {
    "PullConsumer": "consumer.pull", "PullResult": "consumer.pull",
    "PullStatus": "consumer.pull",
    "Producer": "producer.producer", "SendResult": "producer.producer",
    "SendStatus": "producer.producer",
    "PushConsumer": "consumer.push",
    "SimpleConsumer": "consumer.simple", "ReceivedMessage": "consumer.simple",
    "TransactionProducer": "producer.transaction",
    "TransactionSendResult": "producer.transaction",
    "TransactionState": "duomq.common.transaction",
    "ConsumerConfig": "duomq.common.client_config",
    "ProducerConfig": "duomq.common.client_config",
    "SimpleConsumerConfig": "duomq.common.client_config",
    "Message": "duomq.common.message", "MessageExt": "duomq.common.message",
    "MessageQueue": "duomq.common.message",
    **{name: "duomq.common.errors" for name in (
        "DuomqError", "ConfigError", "InvalidNameError", "BadRequestError",
        "UnsupportedVersionError", "UnknownRequestTypeError", "MessageTooLargeError",
        "TopicNotExistError", "NotMasterError", "ServiceNotAvailableError",
        "ZooKeeperUnavailableError", "ZooKeeperRefusedError", "StoreFullError",
        "BrokerSystemError", "OffsetIllegalError", "RequestTimeoutError",
        "BrokerUnreachableError", "NotConnectedError", "BrokerGoneError", "NoRouteError",
        "UnusableRouteError", "ReplicaLagError", "AuthenticationError", "AuthorizationError",
        "TransactionNotFoundError", "TransactionEndedError", "ReceiptExpiredError",
        "QuotaExceededError", "MessageCutError", "ClientClosedError")},
}

__all__ = list(_HOME)


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home if home.startswith("duomq.") else f"{__name__}.{home}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
