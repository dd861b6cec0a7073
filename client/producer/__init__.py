"""A producer's side of the client (aiokafka's ``producer/``): ``Producer``
(``producer``: batches encoded, sent, retried by ``send_attempts`` over the
queues ``selector`` picks) and ``TransactionProducer`` (``transaction``)."""

from duomq.client.producer.producer import Producer
from duomq.client.producer.send_attempts import SendResult, SendStatus
from duomq.client.producer.transaction import TransactionProducer, TransactionSendResult

__all__ = ["Producer", "SendResult", "SendStatus", "TransactionProducer",
           "TransactionSendResult"]
