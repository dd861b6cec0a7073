"""Transactional messages (RocketMQ's model), what clients and brokers share
(pure): the states a local transaction ends in, and the message properties
that carry a transaction.

A producer sends a *half* message: the broker stores it in its internal
topic ``RMQ_SYS_TRANS_HALF_TOPIC`` (replicated and flushed like any other
write), where no consumer sees it, with its real topic and queue in
``REAL_TOPIC`` and ``REAL_QID``. The producer runs its local transaction and
ends it (``END_TRANSACTION``): a commit writes the message to its real topic
and queue as it was sent (properties, keys, tags, delay); a rollback writes
nothing there. Either way the broker records the end in
``RMQ_SYS_TRANS_OP_HALF_TOPIC``, so a second end of the same transaction
changes nothing. A transaction is named by its half message's id.
"""

from __future__ import annotations

import enum

from duomq.format.record import make_msg_id, offset_id, parse_msg_id_epoch

TRANSACTION = "TRAN_MSG"                # "true": a half message
PRODUCER_GROUP = "PGROUP"               # the producer group that checks it back
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"  # check-backs so far
USER = "TRAN_USER"                     # on a half message: the user that sent it (the broker's)
HALF_ID = "TRAN_HALF_ID"                # on a committed message: the transaction's id


class TransactionState(enum.Enum):
    """How a local transaction ended: its message is then committed (sent
    to its topic), rolled back (never seen by consumers), or, UNKNOWN, left
    for the broker to check back later."""
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


def transaction_id(broker_group: str, half_offset: int, epoch: int | None = None) -> str:
    """The transaction's id: its half message's id (``epoch``: of the master
    that stored the half; None, where it is not at hand: the id's earlier
    form, the group and the offset alone, which names the same transaction)."""
    if epoch is None:
        return offset_id(broker_group, half_offset)
    return make_msg_id(broker_group, half_offset, epoch)


def parse_transaction_id_epoch(text: str) -> tuple[str, int, int | None]:
    """``(broker group, the half message's offset, its epoch or None)``."""
    try:
        return parse_msg_id_epoch(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a transaction id (a half message's id, "
                         f"<broker group>:<24 hex digits>)") from None


def parse_transaction_id(text: str) -> tuple[str, int]:
    """``(broker group, the half message's commit-log offset)``; ValueError
    when ``text`` is not a transaction id."""
    group, offset, _epoch = parse_transaction_id_epoch(text)
    return group, offset
