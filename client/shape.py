"""One call shape for every client (issue 69): its group first (nothing,
for a producer without one), everything else by keyword.

    Producer(zookeeper=..., cluster=...)
    Producer("orders-producer", zookeeper=..., cluster=...)
    PullConsumer("audit", zookeeper=..., cluster=...)
    PushConsumer("billing", topic="Orders", on_message=handle)
    SimpleConsumer("workers", subscriptions="Orders")
    TransactionProducer("payments", checker=check)

The shapes of before (a ZooKeeper address and a cluster first, or a topic
and a handler after the group) fail at once with a TypeError naming the new
one, instead of resolving a group name as a host for 10 s."""

from __future__ import annotations

from typing import Any

NEW_SHAPE = {
    "Producer": 'Producer("group", zookeeper="host:2181", cluster="DefaultCluster", ...)',
    "TransactionProducer": 'TransactionProducer("group", checker=check, zookeeper=..., ...)',
    "PullConsumer": 'PullConsumer("group", zookeeper="host:2181", cluster="DefaultCluster")',
    "PushConsumer": 'PushConsumer("group", topic="Orders", on_message=handle, zookeeper=...)',
    "SimpleConsumer": 'SimpleConsumer("group", subscriptions="Orders", zookeeper=..., ...)',
}


def check_shape(cls: str, group: Any, extra: tuple, **needed: Any) -> None:
    """Refuse a call of client ``cls`` with positional arguments past its
    group (``extra``), a group that is a ZooKeeper address, or one of the
    keywords it needs (``needed``) left out: TypeError naming the shape to
    use."""
    if extra:
        raise TypeError(f"{cls} takes its group first and everything else by keyword "
                        f"({len(extra)} more positional argument(s) given): "
                        f"{NEW_SHAPE[cls]}")
    if isinstance(group, str) and looks_like_zookeeper(group):
        raise TypeError(f"{cls}'s first argument is its group, and {group!r} looks like a "
                        f"ZooKeeper address: {NEW_SHAPE[cls]}")
    missing = [k for k, v in needed.items() if v is None]
    if missing:
        raise TypeError(f"{cls} needs {' and '.join(k + '=' for k in missing)}: "
                        f"{NEW_SHAPE[cls]}")


def looks_like_zookeeper(text: str) -> bool:
    """host:port, a list of them, or a chroot: never a group name (RocketMQ's
    names are letters, digits, ``%``, ``|``, ``-`` and ``_``)."""
    return any(c in text for c in ":,/")
