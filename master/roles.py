"""Becoming master, handing over and stepping down, as plain functions the serving thread
calls with what they need (``broker.server`` applies the results to its
state). The decision to do either is the HA controller's."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import zmq

from duomq.master.ack_waiters import AckWaiter, AckWaiters
from duomq.master.offsets import ConsumerOffsetManager
from duomq.master.schedule import ScheduleService
from duomq.master.transactions import TransactionService
from duomq.proto import pb
from duomq.replication.ha_service import HAService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Takeover:
    flushed_offset: int
    schedule: ScheduleService
    transactions: TransactionService
    ha: HAService


def take_over(store, config, epoch: int, offsets: ConsumerOffsetManager,
              delay_levels: tuple[int, ...], ha_router: zmq.Socket, counters) -> Takeover:
    """Own the log at ``epoch``: consume queues complete, the log fsynced,
    the epoch on disk; delayed messages and transactions resume from the
    progress the old master replicated; the replication links start afresh."""
    store.dispatch()
    flushed = store.commitlog.flush()
    store.epoch_file.write(epoch)
    schedule = ScheduleService(store, offsets, delay_levels, config.group)
    transactions = TransactionService(store, offsets, delay_levels, config.group, counters)
    transactions.catch_up()            # the pending transactions, as the old master left them
    return Takeover(flushed, schedule, transactions,
                    HAService(store, config, ha_router, epoch, offsets))


def ready_to_hand_over(links: list[dict], end: int, pending_acks: int) -> bool:
    """A draining master may hand over once a transferring slave holds all
    ``end`` bytes and no send waits for its conditions (pure)."""
    return pending_acks == 0 and any(
        link["acked_offset"] >= end for link in links if link["state"] == "TRANSFER")


def unconfirmed(ack_waiters: AckWaiters, why: str) -> list[tuple[AckWaiter, int, str]]:
    """The answers owed to writes waiting for their conditions when a master
    steps down: stored here, but not confirmed, so they may be lost."""
    return [(w, pb.FLUSH_SLAVE_TIMEOUT,
             f"the master stepped down ({why}) before this send was confirmed; it is stored "
             f"here but may be lost") for w in ack_waiters.drain()]
