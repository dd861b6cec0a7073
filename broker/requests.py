"""What every request handler shares: the decoded ``Request`` and the
``Answer`` a handler returns (``request``), a handler's type, and the checks
most handlers start with (``processors.py`` and ``writes.py`` hold the
handlers)."""

from __future__ import annotations

from collections.abc import Callable

from duomq.broker.core import BrokerCore
from duomq.broker.request import Answer, Request
from duomq.common.errors import (
    BadRequestError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from duomq.common.names import validate_name
from duomq.master.parts import MasterParts

__all__ = ["Answer", "Handler", "Request", "client_key", "hosted", "master_only",
           "stored_record", "writable"]


Handler = Callable[[BrokerCore, Request], Answer | None]


def client_key(user: str | None, client_id: str) -> str:
    """A client as the broker knows it: its id within its user's (client
    ids are readable by every member of a group, so one user naming
    another's id gets a client of its own, not that one's heartbeats,
    check-backs, queue locks or share deliveries)."""
    return f"{user or ''}/{client_id}"


# ------------------------------------------------------------ checks
def master_only(b: BrokerCore) -> MasterParts:
    """The master's parts; NOT_MASTER (with the master's address) on a slave."""
    return b.parts.master_duties(b.not_writable_reason)


def writable(b: BrokerCore) -> None:
    if not b.writable():
        raise ServiceNotAvailableError(b.not_writable_reason())


def hosted(b: BrokerCore, topic: str) -> int:
    """The number of queues this group hosts of ``topic``. Its name is
    checked when it is not hosted (a hosted topic's was, when it was
    created): a bad name is answered as such, not as a topic unknown."""
    queues = b.hosted_queues(topic)
    if queues is None:
        validate_name("topic", topic, allow_system=True)
        raise TopicNotExistError(f"topic {topic!r} is not hosted by broker group "
                                 f"{b.config.group!r}")
    return queues


def stored_record(b: BrokerCore, physical_offset: int, visible_end: int) -> memoryview:
    view = b.store.read_record(physical_offset, visible_end)
    if view is None:
        raise BadRequestError(f"no message is stored at offset {physical_offset} of broker "
                              f"group {b.config.group!r}")
    return view


