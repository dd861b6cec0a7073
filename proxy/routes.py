"""A topic's duomq route as the protocol's message queues. Pure: no I/O.

Every queue's broker endpoints are the proxy's (the address the client
dialled, as RocketMQ 5's proxy in cluster mode answers): a client sends
and receives through the proxies only, and any proxy serves any queue."""

from __future__ import annotations

import ipaddress

from duomq.coordinator.topics import PERM_READ, PERM_WRITE
from duomq.proxy.protocol import d

ALL_TYPES = (d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION)


def scheme_of(host: str) -> int:
    """The address scheme of a host: an IPv4 or IPv6 literal, else a name."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return d.DOMAIN_NAME
    return d.IPv4 if ip.version == 4 else d.IPv6


def endpoints(asked, own: tuple[str, int]) -> d.Endpoints:
    """The endpoints to name in routes: those the client says it dialled
    (``asked``, their scheme filled in when it left it out), else the
    proxy's own advertised ``(host, port)``."""
    out = d.Endpoints()
    if asked is not None and asked.addresses:
        out.CopyFrom(asked)
    else:
        out.addresses.add(host=own[0], port=own[1])
    if out.scheme == d.ADDRESS_SCHEME_UNSPECIFIED:
        out.scheme = scheme_of(out.addresses[0].host)
    return out


def permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return d.READ_WRITE
    return d.READ if readable else d.WRITE if writable else d.NONE


def message_queues(topic: str, namespace: str, groups: dict, where: d.Endpoints,
                   types=ALL_TYPES) -> list[d.MessageQueue]:
    """The queues of ``groups`` (broker group -> its route node: ``perm``,
    ``queues``), in group order, each served at ``where``."""
    out = []
    for name in sorted(groups):
        r = groups[name]
        perm = permission(r.perm)
        for q in range(r.queues):
            mq = d.MessageQueue(id=q, permission=perm, accept_message_types=types)
            mq.topic.name, mq.topic.resource_namespace = topic, namespace
            mq.broker.name, mq.broker.id = name, 0
            mq.broker.endpoints.CopyFrom(where)
            out.append(mq)
    return out


ALL_QUEUES = -1       # an assignment's queue id: every queue of its broker group


def assignments(topic: str, namespace: str, groups: dict, where: d.Endpoints) -> list:
    """A PushConsumer's assignment: one queue a readable broker group, naming
    all its queues (a POP at the group serves every queue of it)."""
    out = []
    for name in sorted(groups):
        if not groups[name].perm & PERM_READ:
            continue
        mq = d.MessageQueue(id=ALL_QUEUES, permission=permission(groups[name].perm),
                            accept_message_types=ALL_TYPES)
        mq.topic.name, mq.topic.resource_namespace = topic, namespace
        mq.broker.name, mq.broker.id = name, 0
        mq.broker.endpoints.CopyFrom(where)
        out.append(mq)
    return out
