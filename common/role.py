"""A broker's role (RocketMQ's ``BrokerRole``, without its SYNC/ASYNC split,
which is the ``replication`` setting here). A ``str`` enum: it compares equal
to the text a member node, a status answer or a heartbeat carries."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    MASTER = "MASTER"       # takes writes, streams its log to slaves
    SLAVE = "SLAVE"         # follows the master of an epoch, serves reads

    @classmethod
    def parse(cls, text: object) -> Role | None:
        """The role a text names, or None."""
        try:
            return cls(text) if isinstance(text, str) else None
        except ValueError:
            return None
