"""Clients: ``Producer``, ``PullConsumer`` and ``PushConsumer``.

    from duomq.client import Producer, Message
    with Producer(zookeeper="127.0.0.1:2181", cluster="DefaultCluster") as p:
        result = p.send(Message("Orders", b"hello"))
"""

from duomq.client.consumer import PullConsumer, PullResult, PullStatus
from duomq.client.producer import Producer, SendResult, SendStatus
from duomq.client.push_consumer import PushConsumer
from duomq.common.config import ConsumerConfig, ProducerConfig
from duomq.common.message import Message, MessageExt, MessageQueue

__all__ = ["Producer", "SendResult", "SendStatus", "PullConsumer", "PullResult", "PullStatus",
           "PushConsumer", "Message", "MessageExt", "MessageQueue", "ProducerConfig",
           "ConsumerConfig"]
