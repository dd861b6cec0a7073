"""The store's one writer: one thread at a time appends to the commit log,
writes consume-queue entries, cuts the log or deletes what retention
expired. It is the thread that started the store (the broker's serving
thread), except while a slave's replication thread runs: that thread takes
the store when it starts (``adopt``) and gives it back when it ends
(``hand_over``), and the serving thread posts it the writes it wants
meanwhile (retention's).
The flush and checkpoint services only make durable what the writer wrote.
A write from any other thread is a bug, and refused before it changes
anything (``NotTheWriter``), not left to race: until issue 68 a slave's
serving thread deleted expired segments while its replication thread
appended and dispatched on the same store."""

from __future__ import annotations

import threading


class NotTheWriter(RuntimeError):
    """A thread other than the store's writer tried to write it."""


class OneWriter:
    """The store's writer, shared by the store and the parts that write it."""

    def __init__(self) -> None:
        self.owner: int | None = None     # the writer's thread ident (None: not started)

    def adopt(self) -> None:
        """The calling thread writes this store from now on (``start`` calls
        it; a test that hands a store to a thread of its own, too)."""
        self.owner = threading.get_ident()

    def hand_over(self, ident: int) -> None:
        """The thread ``ident`` writes this store from now on: the writer
        gives it back to the thread it took it from (a slave's replication
        thread when it ends). Only the writer may."""
        self.check("a hand-over")
        self.owner = ident

    def check(self, what: str) -> None:
        """NotTheWriter unless the calling thread is the writer (``what``: the write)."""
        owner = self.owner
        if owner is not None and threading.get_ident() != owner:
            me = threading.current_thread().name
            raise NotTheWriter(f"{what} from thread {me!r}: only the thread that started the "
                               f"store writes it")
