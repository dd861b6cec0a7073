"""What the store's composed parts (``writes``, ``reads``, ``reput``) share
of the ``MessageStore`` that holds them (``StoreView``, kept by each
``StorePart``), and the batch written last (``Fresh``). The parts keep the store's files by reference;
the offsets they move are the store's own fields."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Protocol

from duomq.common.config import BrokerConfig
from duomq.store.commitlog import CommitLog
from duomq.store.consume_queue import ConsumeQueue
from duomq.store.key_index import KeyIndex
from duomq.store.one_writer import OneWriter
from duomq.store.producer_state import ProducerStates


@dataclass(slots=True, frozen=True)
class Fresh:
    """The batch written last (``StoreWrites._stored``), as written: a pull of
    exactly it (a consumer at its queue's end, its pull held for it) is
    answered from these bytes, without reading the queue and the log back."""
    topic: str
    queue_id: int
    queue_offset: int
    count: int
    records: bytearray            # its records as stored, sealed
    end: int                      # the commit log's end after it


class StoreView(Protocol):
    config: BrokerConfig
    commitlog: CommitLog
    queues: dict[tuple[str, int], ConsumeQueue]
    index: KeyIndex
    producers: ProducerStates
    # (topic, queue, commit-log end) of each write of consume-queue entries
    appended: collections.deque[tuple[str, int, int]]
    writer: OneWriter              # the one thread that writes (``one_writer``)
    epoch: int                     # stamped into every record written (the master's)
    fresh: Fresh | None            # the batch written last; None after any other change
    dispatched_offset: int         # commit-log offset whose queue entries are all written
    messages_stored: int

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...

    def observe_sequenced(self, sequenced: list[int], checked: bool = False) -> None: ...


class StorePart:
    """A part ``MessageStore`` composes (its write path, read path,
    dispatch): the store's files and its one writer kept by reference, the
    offsets it moves read and written on ``store``."""

    def __init__(self, store: StoreView) -> None:
        self.store = store
        self.config = store.config
        self.commitlog = store.commitlog
        self.queues = store.queues
        self.index = store.index
        self.producers = store.producers
        self.appended = store.appended
        self.writer = store.writer
