"""Transactions through the proxy: a TRANSACTION message is stored as
duomq's half message (checked back with the proxies' producer group,
``PROXY_GROUP``: any proxy takes a check-back), ended by ``EndTransaction``
(from the client, or from its checker); a broker's check-back goes to a
producer client that publishes the topic, over its Telemetry stream, as a
``RecoverOrphanedTransactionCommand``."""

from __future__ import annotations

import logging
import random

from duomq.common import transaction as tx
from duomq.common.message import MessageExt
from duomq.common.transaction import TransactionState
from duomq.proxy import convert
from duomq.proxy.convert import status
from duomq.proxy.protocol import d, s

log = logging.getLogger("duomq.proxy")

PROXY_GROUP = "PROXY_PRODUCER"        # every proxy's producer group: check-backs reach any
_STATES = {d.COMMIT: TransactionState.COMMIT, d.ROLLBACK: TransactionState.ROLLBACK}


def half_properties(props: dict[str, str]) -> dict[str, str]:
    """A TRANSACTION message's properties as duomq's half message's."""
    return {**props, tx.TRANSACTION: "true", tx.PRODUCER_GROUP: PROXY_GROUP}


def transaction_id(result) -> str:
    """The transaction's id from its half message's SendResult."""
    if not result.physical_offsets:
        return ""
    return tx.transaction_id(result.broker_group, result.physical_offsets[0],
                             result.stored_epoch or result.epoch)


class Transactions:
    def __init__(self, producer, telemetry):
        self.producer = producer              # a TransactionProducer of PROXY_GROUP
        self.telemetry = telemetry
        producer.checker = self.check_back

    def end(self, request, context) -> s.EndTransactionResponse:
        state = _STATES.get(request.resolution)
        if state is None:
            return s.EndTransactionResponse(status=status(
                d.BAD_REQUEST, "EndTransaction needs a resolution: COMMIT or ROLLBACK"))
        if not request.topic.name or not request.transaction_id:
            return s.EndTransactionResponse(status=status(
                d.BAD_REQUEST, "EndTransaction needs a topic and a transaction id"))
        try:
            tx.parse_transaction_id(request.transaction_id)
        except ValueError as exc:
            return s.EndTransactionResponse(status=status(d.INVALID_TRANSACTION_ID, str(exc)))
        try:
            self.producer.end_transaction(request.transaction_id, request.topic.name, state,
                                          from_check=request.source == d.SOURCE_SERVER_CHECK)
        except Exception as exc:
            return s.EndTransactionResponse(status=status(convert.error_code(exc), str(exc)))
        return s.EndTransactionResponse(status=status(d.OK))

    def check_back(self, msg: MessageExt) -> TransactionState:
        """A broker asks about a pending transaction (msg: its half message as
        sent): asked of a producer client that publishes its topic; its
        answer comes as an EndTransaction. UNKNOWN here: the proxy decides
        nothing itself (no producer online: the broker asks again later)."""
        sessions = self.telemetry.publishers(msg.topic)
        if not sessions:
            log.info("check-back of %s: no producer of %s is connected to this proxy",
                     msg.msg_id, msg.topic)
            return TransactionState.UNKNOWN
        tid = msg.properties.get(tx.HALF_ID, msg.msg_id)
        cmd = s.TelemetryCommand()
        cmd.recover_orphaned_transaction_command.transaction_id = tid
        cmd.recover_orphaned_transaction_command.message.CopyFrom(convert.incoming(msg, ""))
        random.choice(sessions).outbox.put(cmd)
        return TransactionState.UNKNOWN
