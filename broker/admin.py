"""The operators' requests: deleting a consumer group's offsets
(``duomq group delete``, Kafka's ``--delete``) and a broker's settings
(``duomq broker config get|set``, RocketMQ's ``updateBrokerConfig``).

A running broker changes only the settings in ``RUNTIME``: each is read
where it is used, from the broker's config (or its master parts'), so a
change takes effect on the next request or timer. The others are fixed for
the process (ports, paths, the record and segment sizes, flush and
replication modes, timeouts that routes publish to producers) and are
refused by name. A change lasts until the broker restarts: put it in the
config file to keep it."""

from __future__ import annotations

import dataclasses
import time

from duomq.broker.core import BrokerCore
from duomq.broker.requests import Answer, Request, master_only
from duomq.common.config import BrokerConfig, parse_settings
from duomq.common.errors import BadRequestError, ConfigError
from duomq.common.names import validate_name
from duomq.proto import pb

RUNTIME = frozenset({
    "long_polling_timeout_ms", "max_pull_messages", "max_pull_bytes", "read_advice_ttl_ms",
    "access_in_memory_max_ratio", "slave_read_back_ratio", "file_reserved_hours",
    "retention_check_interval_ms", "retention_wait_for_consumers", "transaction_timeout_ms",
    "transaction_check_interval_ms", "transaction_check_max", "max_consumer_groups",
})
SECRET = frozenset({"zookeeper_sasl_file"})    # a path to a secret: shown, never its content


def delete_group(b: BrokerCore, r: Request) -> Answer:
    """Forget a consumer group's committed offsets, and a share group's
    state, on this master (its slaves follow through the replication stream). The CLI refuses a group
    with live members; a member that commits later recreates its offsets."""
    req: pb.DeleteGroupRequest = r.message
    m = master_only(b)            # offsets live on the master; slaves only copy them
    group = validate_name("consumer group", req.consumer_group)
    now = time.time_ns() // 1_000_000
    readers = m.share.readers(group, now)
    said = ", ".join(readers[:3]) + (", ..." if len(readers) > 3 else "")
    if req.check:
        return pb.OK, "", pb.DeleteGroupResponse(share_readers=len(readers), readers=said)
    if readers and not req.force:
        raise BadRequestError(f"share group {group!r} has {len(readers)} reader(s) on broker "
                              f"group {b.config.group!r} ({said}): stop them first, or force "
                              f"it (they lose what they hold)")
    # a share group's state too (the share log says so: a new master forgets it as well)
    shared = m.share.forget(group, now)
    if shared:
        b.state.appended = True
    return pb.OK, "", pb.DeleteGroupResponse(queues=b.offsets.delete_group(group) + shared,
                                             share_readers=len(readers), readers=said)


def broker_config(b: BrokerCore, r: Request) -> Answer:
    """The broker's settings; with ``set``, change the runtime ones first."""
    req: pb.BrokerConfigRequest = r.message
    changed: list[str] = []
    if req.set:
        fixed = sorted(set(req.set) - RUNTIME)
        if fixed:
            known = {f.name for f in dataclasses.fields(BrokerConfig)}
            unknown = [n for n in fixed if n not in known]
            raise BadRequestError(
                f"no such setting: {', '.join(unknown)}" if unknown else
                f"{', '.join(fixed)} cannot change while the broker runs (set it in the "
                f"config file and restart it); at runtime: {', '.join(sorted(RUNTIME))}")
        try:
            changes = parse_settings(BrokerConfig, [f"{k}={v}" for k, v in req.set.items()])
            config = b.config.replace(**changes)
        except ConfigError as exc:
            raise BadRequestError(str(exc)) from None
        changed = sorted(k for k in changes if getattr(b.config, k) != getattr(config, k))
        apply(b, config)
    resp = pb.BrokerConfigResponse(runtime=sorted(RUNTIME), changed=changed)
    for f in dataclasses.fields(b.config):
        value = getattr(b.config, f.name)
        resp.values[f.name] = str(getattr(value, "value", value))
    return pb.OK, "", resp


def apply(b: BrokerCore, config: BrokerConfig) -> None:
    """The new config, wherever a runtime setting is read."""
    b.config = config
    b.parts.apply(config)
