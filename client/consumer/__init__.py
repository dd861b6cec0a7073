"""A consumer's side of the client (aiokafka's ``consumer/``): the
``PullConsumer`` (``pull``), the ``PushConsumer`` built on it (``push``:
queues shared by ``rebalancer`` and ``allocate``, pulled by ``pull_loop``
into each queue's ``process_queue``, handled by ``consume_service``, their
offsets committed by ``offset_committer`` or kept in an ``offset_file``,
orderly queues held by ``queue_locker``, a queue handed over by
``handoff``) and the ``SimpleConsumer`` of share groups (``simple``)."""

from duomq.client.consumer.pull import PullConsumer, PullResult
from duomq.client.consumer.push import PushConsumer
from duomq.client.consumer.simple import ReceivedMessage, SimpleConsumer

__all__ = ["PullConsumer", "PullResult", "PushConsumer", "ReceivedMessage", "SimpleConsumer"]
