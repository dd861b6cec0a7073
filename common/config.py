"""Configuration: one frozen dataclass per role, units in field names, defaults
documented beside the fields (and in the README's reference), validated in
``__post_init__`` with an error that names the field.

A broker reads its config from a TOML file, then ``DUOMQ_<FIELD>`` environment
variables, then command-line flags (each overriding the one before).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from duomq.common.config_fields import (  # noqa: F401 (parse_settings: the CLI's)
    _check_client_transport,
    _check_known,
    _check_metrics_port,
    _coerce,
    _positive,
    check_port_transports,
    check_types,
    parse_settings,
)
from duomq.common.delay import DEFAULT_LEVELS, parse_levels
from duomq.common.endpoint import exposed_without_auth
from duomq.common.errors import ConfigError
from duomq.common.names import validate_name


class FlushDiskType(str, enum.Enum):
    SYNC_FLUSH = "SYNC_FLUSH"    # ack after fsync (group commit)
    ASYNC_FLUSH = "ASYNC_FLUSH"  # ack after the page cache; flushed periodically


class ReplicationMode(str, enum.Enum):
    SYNC = "SYNC"    # ack once sync_replicas slaves hold the record
    ASYNC = "ASYNC"  # ack without waiting for slaves


KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def _enum(cls, value, name):
    if isinstance(value, cls):
        return value
    text = str(value).upper().replace("-", "_")
    aliases = {"SYNC": "SYNC_FLUSH", "ASYNC": "ASYNC_FLUSH"} if cls is FlushDiskType else {}
    text = aliases.get(text, text)
    try:
        return cls(text)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise ConfigError(f"{name}: {value!r} is not one of {allowed}") from None


FRAME_ENVELOPE_BYTES = 64 * KIB            # a request's framing around its records
ANY_HOSTS = ("0.0.0.0", "::", "*")        # listen_host values that bind every interface
ALLOCATE_STRATEGIES = ("average", "circle", "consistent_hash")   # duomq.client.consumer.allocate
MAX_BUSY_POLL_US = 10_000                  # busy_poll_us: longer spins only burn CPU
MAX_HA_LINGER_MS = 100                     # ha_linger_ms: longer only delays slave reads


@dataclass(frozen=True)
class BrokerConfig:
    """Everything one broker process needs. Times in ms, sizes in bytes."""

    # --- identity and coordination
    cluster: str = "DefaultCluster"          # cluster name (ZooKeeper path component)
    group: str = "broker-a"                  # broker group (a master and its slaves)
    broker_id: int = 0                       # this broker's id in its group (any role: the
                                             # group's election makes one master)
    zookeeper: str = "127.0.0.1:2181"        # ZooKeeper connect string host:port[,...][/chroot]
    zk_session_timeout_ms: int = 15_000      # ZooKeeper session timeout: failover does not
                                             # wait for it (master_lease_ms); long enough that
                                             # a ZooKeeper outage shorter than it ends no
                                             # session (no ephemeral node lost, no failover)
    master_lease_ms: int = 1800              # slaves presume the master dead when its node
                                             # goes unrenewed this long while ZooKeeper
                                             # answers them; it renews every sixth of it and
                                             # acks under its quorum rule for half of it
    zookeeper_sasl_file: str = ""            # a file holding a SASL (DIGEST-MD5) login,
                                             # user:password, for an ensemble that asks for
                                             # one (default with auth: auth_dir/zookeeper.sasl
                                             # if there is one)
    pod_name: str = ""                       # a StatefulSet pod, `<group>-<ordinal>`: the
                                             # group and broker_id follow from it
    # --- network
    listen_host: str = "127.0.0.1"           # interface the client ROUTER binds
    port: int = 10911                        # client port; 0 picks a free one
    advertised_host: str = ""                # host clients dial; default listen_host
    external_host: str = ""                  # host clients outside this network dial (a
                                             # client with external = true), e.g. a load
                                             # balancer's name; "": none
    external_port: int = 0                   # ... and its port (0: port)
    # --- store
    data_dir: str = "./duomq-data"           # commit log, consume queues, checkpoint, offsets
    segment_size_bytes: int = 1 * GIB        # commit-log segment file size (preallocated)
    cq_entries_per_segment: int = 300_000    # consume-queue entries per segment file (20 B each)
    max_message_bytes: int = 4 * MIB         # largest accepted record (header + fields + body)
    file_reserved_hours: float = 72.0        # keep commit-log segments at least this long
    retention_check_interval_ms: int = 10_000  # how often retention looks for old segments
    retention_wait_for_consumers: bool = True  # keep a segment a consumer group has not consumed
    index_slot_count: int = 5_000_000        # key index: hash slots per index file (4 B each)
    index_max_entries: int = 20_000_000      # key index: entries per index file (20 B each;
                                             # files are sparse, disk is taken as they fill)
    # --- flush
    flush: FlushDiskType = FlushDiskType.ASYNC_FLUSH  # SYNC_FLUSH: a send is acked once
                                             # fsynced (group commit); ASYNC_FLUSH: once in
                                             # the page cache, flushed every flush_interval_ms
    sync_flush_timeout_ms: int = 5000        # SYNC_FLUSH: answer FLUSH_DISK_TIMEOUT past this
    flush_interval_ms: int = 500             # ASYNC_FLUSH: flush period
    flush_least_pages: int = 4               # ASYNC_FLUSH: flush only with this many dirty 4 KiB pages
    flush_thorough_interval_ms: int = 10_000  # ASYNC_FLUSH: flush everything this often
    checkpoint_interval_ms: int = 1000       # flush consume queues and write the checkpoint
    cq_flush_least_pages: int = 2            # ... flushing a consume queue only with this many
                                             # 4 KiB pages of entries written (RocketMQ's)
    cq_flush_thorough_interval_ms: int = 60_000  # ... and every queue this often (recovery
                                             # replays the commit log from the oldest left)
    # --- replication
    replication: ReplicationMode = ReplicationMode.ASYNC  # SYNC: a send is acked once
                                             # sync_replicas slaves hold it; ASYNC: at once
    slave_timeout_ms: int = 3000             # SYNC replication: FLUSH_SLAVE_TIMEOUT past this
    sync_replicas: int = 1                   # SYNC: slaves that must hold a record before SEND_OK
    min_sync_replicas: int | None = None     # SYNC: with fewer slaves in sync than
                                             # sync_replicas but at least this many, ack once
                                             # every in-sync slave holds the record (0: a lone
                                             # master acks alone); default: sync_replicas
    slave_flush: FlushDiskType | None = None  # as a slave: SYNC_FLUSH acks only fsynced bytes;
                                             # default: the same as `flush`
    ha_port: int = 10912                     # the master's replication port; 0 picks a free one
    metrics_port: int = 5557                 # Prometheus /metrics (RocketMQ 5's exporter port);
                                             # 0 picks a free one, -1 serves none
    metrics_host: str = ""                   # the interface /metrics binds ("": listen_host);
                                             # with auth, scrapes carry auth_dir/metrics.token
    metrics_per_queue: bool = False          # also series per queue (queue_id label): each
                                             # queue's end and each group's lag on it
    auth: bool = False                       # CURVE on both ports; only registered users' keys
                                             # (client port) and the broker key (both) connect
    auth_dir: str = ""                       # with auth: the broker keypair and the admin
                                             # user's public key (duomq auth init writes them)
    allow_insecure: bool = False             # serve without auth on an address other hosts
                                             # reach (listen_host not loopback): refused
                                             # unless set (a trusted network, a dev cluster)
    ha_max_gap_bytes: int = 256 * MIB        # a slave further behind is not in sync
    ha_housekeeping_ms: int = 20_000         # drop a replication link silent this long
    ha_heartbeat_ms: int = 1000              # report / heartbeat on an idle link this often
    ha_transfer_batch_bytes: int = 1 * MIB   # largest chunk sent to a slave
    ha_window_bytes: int = 8 * MIB           # most bytes in flight to one slave
    ha_linger_ms: int = 1                    # a transfer nothing waits on (ASYNC) gathers
                                             # the sends of this long (0: each goes at once)
    ha_apply_idle: bool = True               # ASYNC: a slave applies the log under SCHED_IDLE
    ha_apply_nice: int = 10                  # ... or, without it, this much nicer
    housekeeping_interval_ms: int = 50       # the serving loop's rounds: held pulls' deadlines,
                                             # replication links, the published state (a held
                                             # pull whose data arrives is woken at once; a
                                             # round only answers one whose wait ran out)
    allow_lagging_promotion: bool = False    # may a slave outside the in-sync set take over?
    promotable: bool = True                  # false: a read replica that never takes over
    # --- reads from slaves
    access_in_memory_max_ratio: float = 0.40  # backlog past this share of RAM goes to a slave
    slave_read_back_ratio: float = 0.30      # a slave sends readers back below this share
    read_advice_ttl_ms: int = 10_000         # clients follow read advice this long
    election_settle_ms: int = 200            # after the master vanishes, wait this long for
                                             # peers to publish their offsets, then elect
    # --- serving
    long_polling_timeout_ms: int = 15_000    # longest a pull is held waiting for messages
    max_pull_messages: int = 1024            # most records one pull answer carries
    max_pull_bytes: int = 4 * MIB            # most bytes one pull answer carries
    offset_persist_interval_ms: int = 5000   # persist consumer offsets this often
    busy_poll_us: int = 100                  # after a turn with requests, the serving thread
                                             # asks its sockets this long before it sleeps
                                             # (Linux's net.core.busy_poll): a request that
                                             # comes within it is read without a wake-up; it
                                             # spins only while half the recent waits were
                                             # that short; 0: sleep at once (no CPU spent)
    client_transport: str = "auto"           # the client port: "native" (the serving thread
                                             # speaks ZeroMQ's ZMTP itself: no I/O-thread hop
                                             # per request; no CURVE), "zeromq" (libzmq's
                                             # ROUTER), "auto" (native, zeromq with auth)
    ha_transport: str = "auto"               # the replication link, both ends, as above
    # --- limits per peer (a client that does not read, or sends garbage)
    max_frame_bytes: int = 16 * MIB          # largest request frame on the client port (a
                                             # larger one closes the connection: ZeroMQ's
                                             # MAXMSGSIZE); producers split or refuse below it
    max_queued_bytes_per_client: int = 64 * MIB  # answers waiting for a client that does not
                                             # read; past it the client is muted
    client_mute_ms: int = 30_000             # a muted client's requests are dropped this long,
                                             # then it is forgotten
    max_consumer_groups: int = 10_000        # groups with committed offsets on this broker
    # --- quotas of each user (auth = true; a user's own replace them: auth.quotas)
    quota_groups: int = 100                  # consumer groups one user's clients use here
    quota_share_groups: int = 100            # share groups one user pops from here
    quota_held_pops: int = 1000              # POPs of one user held at once here
    quota_open_transactions: int = 10_000    # transactions of one user open at once here
    quota_clients: int = 1000                # client ids one user's heartbeats name here
    quota_connections: int = 1000            # connections of one user that sent a request here
    # --- share groups (SimpleConsumer: POP and SHARE_ACK)
    share_max_held: int = 10_000             # messages one share group holds on this broker
                                             # (in flight, or waiting to be delivered again)
    share_window: int = 2000                 # a share group's window on one queue: a message
                                             # not acked holds back at most this many after it
    # --- delays, retries
    message_delay_level: str = DEFAULT_LEVELS  # delay levels 1..N (RocketMQ's 18 by default)
    timer_max_delay_ms: int = 7 * 86_400_000   # a timer message's delivery time at most this
                                             # far ahead (RocketMQ's timerMaxDelaySec: 3 days)
    timer_slot_ms: int = 1000                # the timer wheel's slot (RIP-43's precision;
                                             # a timer fires at its time within a slot)
    timer_memory_timers: int = 100_000       # timers of the due slot held in memory at most
                                             # (past it a slot's timers fire in slot order)
    transaction_timeout_ms: int = 6000       # a transaction pending this long is checked back
    transaction_check_interval_ms: int = 60_000   # ... at most this often (RocketMQ's)
    transaction_check_max: int = 15          # check-backs before it is rolled back
    # --- logging
    log_file: str = ""                       # also log to this file, rotated ("": stderr only)
    log_max_bytes: int = 100 * MIB           # rotate the log file at this size
    log_backups: int = 5                     # rotated log files kept beside it

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen)
        check_types(self)
        set_("flush", _enum(FlushDiskType, self.flush, "flush"))
        set_("replication", _enum(ReplicationMode, self.replication, "replication"))
        set_("slave_flush", self.flush if self.slave_flush in (None, "")
             else _enum(FlushDiskType, self.slave_flush, "slave_flush"))
        validate_name("cluster", self.cluster)
        validate_name("broker group", self.group)
        if self.master_lease_ms < 600:
            raise ConfigError(f"master_lease_ms: must be at least 600 (it is renewed every "
                              f"sixth of it), got {self.master_lease_ms}")
        _positive(self, "zk_session_timeout_ms", "sync_flush_timeout_ms", "flush_interval_ms",
                  "flush_thorough_interval_ms", "checkpoint_interval_ms", "slave_timeout_ms",
                  "cq_flush_thorough_interval_ms",
                  "long_polling_timeout_ms", "max_pull_messages", "max_pull_bytes",
                  "offset_persist_interval_ms", "retention_check_interval_ms",
                  "sync_replicas", "ha_max_gap_bytes", "ha_housekeeping_ms", "ha_heartbeat_ms",
                  "ha_transfer_batch_bytes", "ha_window_bytes", "read_advice_ttl_ms",
                  "cq_entries_per_segment", "max_message_bytes", "segment_size_bytes",
                  "index_slot_count", "index_max_entries", "share_max_held", "share_window",
                  "timer_max_delay_ms", "timer_slot_ms", "timer_memory_timers")
        if self.timer_slot_ms > 60_000 or self.timer_max_delay_ms // self.timer_slot_ms > 1 << 26:
            raise ConfigError(f"timer_slot_ms: {self.timer_slot_ms} must be at most 60000 and "
                              f"leave at most {1 << 26} slots in timer_max_delay_ms "
                              f"({self.timer_max_delay_ms})")
        parse_levels(self.message_delay_level)
        if self.min_sync_replicas is None:
            set_("min_sync_replicas", self.sync_replicas)
        elif not 0 <= self.min_sync_replicas <= self.sync_replicas:
            raise ConfigError(f"min_sync_replicas ({self.min_sync_replicas}) must be between 0 "
                              f"and sync_replicas ({self.sync_replicas})")
        for name in ("index_slot_count", "index_max_entries"):
            if getattr(self, name) >= 1 << 31:
                raise ConfigError(f"{name}: must be below 2**31, got {getattr(self, name)}")
        if self.broker_id < 0:
            raise ConfigError(f"broker_id: must be >= 0, got {self.broker_id}")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"port: {self.port} is not a TCP port")
        if self.flush_least_pages < 0:
            raise ConfigError("flush_least_pages: must be >= 0")
        for name in ("quota_groups", "quota_share_groups", "quota_held_pops",
                     "quota_open_transactions", "quota_clients", "quota_connections"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.busy_poll_us <= MAX_BUSY_POLL_US:
            raise ConfigError(f"busy_poll_us: must be between 0 and {MAX_BUSY_POLL_US} (a "
                              f"short wait before sleeping), got {self.busy_poll_us}")
        if self.cq_flush_least_pages < 0:
            raise ConfigError("cq_flush_least_pages: must be >= 0")
        if self.file_reserved_hours <= 0:
            raise ConfigError("file_reserved_hours: must be > 0")
        self._check_sizes()
        _positive(self, "client_mute_ms", "max_consumer_groups", "transaction_timeout_ms",
                  "transaction_check_interval_ms", "transaction_check_max", "log_max_bytes")
        if self.log_backups < 0:
            raise ConfigError(f"log_backups: must be >= 0, got {self.log_backups}")
        if self.flush_thorough_interval_ms < self.flush_interval_ms:
            raise ConfigError("flush_thorough_interval_ms: must be >= flush_interval_ms")
        self._check_network()

    def _check_sizes(self) -> None:
        """Sizes that must fit one in another: a record in a segment, in a
        pull, in a frame, in what a client may have queued."""
        from duomq.format.record import HEADER_SIZE
        if self.max_message_bytes < HEADER_SIZE + 1:
            raise ConfigError(f"max_message_bytes: {self.max_message_bytes} cannot hold a "
                              f"record header of {HEADER_SIZE} bytes")
        if self.segment_size_bytes < self.max_message_bytes + HEADER_SIZE:
            raise ConfigError(
                f"segment_size_bytes ({self.segment_size_bytes}) must exceed max_message_bytes "
                f"({self.max_message_bytes}) plus a {HEADER_SIZE}-byte end-of-segment marker: "
                f"a record never spans two segments")
        if self.max_pull_bytes < self.max_message_bytes:
            raise ConfigError(
                f"max_pull_bytes ({self.max_pull_bytes}) must be >= max_message_bytes "
                f"({self.max_message_bytes}), or the largest message could never be pulled")
        if self.max_frame_bytes < self.max_message_bytes + FRAME_ENVELOPE_BYTES:
            raise ConfigError(f"max_frame_bytes ({self.max_frame_bytes}) must be at least "
                              f"max_message_bytes ({self.max_message_bytes}) plus "
                              f"{FRAME_ENVELOPE_BYTES} bytes of request envelope")
        if self.max_queued_bytes_per_client < self.max_pull_bytes:
            raise ConfigError(f"max_queued_bytes_per_client ({self.max_queued_bytes_per_client}) "
                              f"must be >= max_pull_bytes ({self.max_pull_bytes}), or one "
                              f"pull answer could mute a client")

    def _check_network(self) -> None:
        """Ports, hosts, auth and the replication link's timings."""
        if self.listen_host in ANY_HOSTS and not self.advertised_host:
            raise ConfigError(f"listen_host {self.listen_host!r} binds every interface: set "
                              f"advertised_host, the address clients and slaves dial")
        if not 0 <= self.external_port < 65536 or (self.external_port and not self.external_host):
            raise ConfigError(f"external_port: {self.external_port} must be a TCP port, and "
                              f"only with external_host (0: the same as port)")
        if not 0 <= self.ha_port < 65536 or (self.ha_port and self.ha_port == self.port):
            raise ConfigError(f"ha_port: {self.ha_port} must be a TCP port other than port")
        if not -1 <= self.metrics_port < 65536 or \
                (self.metrics_port > 0 and self.metrics_port in (self.port, self.ha_port)):
            raise ConfigError(f"metrics_port: {self.metrics_port} must be a TCP port other than "
                              f"port and ha_port (0: a free one, -1: no metrics)")
        if exposed_without_auth(self.auth, self.listen_host) and not self.allow_insecure:
            raise ConfigError(f"listen_host {self.listen_host!r} is reachable from other hosts "
                              f"and auth = false: anyone who reaches the broker could read and "
                              f"write every topic. Set auth = true and auth_dir (duomq auth "
                              f"init), or listen on loopback, or set allow_insecure = true for "
                              f"a network you trust")
        check_port_transports(self)
        if self.auth and not self.auth_dir:
            raise ConfigError("auth = true needs auth_dir: the directory `duomq auth init "
                              "--out DIR` wrote (the broker keypair)")
        if not 0 < self.slave_read_back_ratio < self.access_in_memory_max_ratio <= 1:
            raise ConfigError("slave_read_back_ratio must be below access_in_memory_max_ratio "
                              "(both in (0, 1]), or readers would bounce between brokers")
        if not 0 <= self.ha_apply_nice <= 19:
            raise ConfigError(f"ha_apply_nice: must be in 0..19 (0 keeps the broker's "
                              f"priority), got {self.ha_apply_nice}")
        if not 0 <= self.ha_linger_ms <= MAX_HA_LINGER_MS:
            raise ConfigError(f"ha_linger_ms: must be between 0 and {MAX_HA_LINGER_MS}, got "
                              f"{self.ha_linger_ms}")
        if self.ha_window_bytes < self.ha_transfer_batch_bytes:
            raise ConfigError("ha_window_bytes: must be >= ha_transfer_batch_bytes")
        if not 1 <= self.housekeeping_interval_ms <= self.ha_heartbeat_ms // 2:
            raise ConfigError(f"housekeeping_interval_ms: must be between 1 and half of "
                              f"ha_heartbeat_ms ({self.ha_heartbeat_ms // 2}), or replication "
                              f"links would be judged by stale rounds; got "
                              f"{self.housekeeping_interval_ms}")
        if self.ha_housekeeping_ms <= 2 * self.ha_heartbeat_ms:
            raise ConfigError("ha_housekeeping_ms: must exceed two ha_heartbeat_ms, or idle "
                              "links would be dropped")

    # ------------------------------------------------------------ derived
    @property
    def native_client_port(self) -> bool:
        """Whether the serving thread speaks ZMTP on the client port itself."""
        return self.client_transport == "native" or \
            (self.client_transport == "auto" and not self.auth)

    @property
    def native_ha_port(self) -> bool:        # the same, of the replication port
        return self.ha_transport == "native" or (self.ha_transport == "auto" and not self.auth)

    @property
    def address(self) -> str:
        """The ZeroMQ endpoint clients dial."""
        return f"tcp://{self.advertised_host or self.listen_host}:{self.port}"

    @property
    def external_address(self) -> str:
        """The endpoint clients outside the network dial ("": none)."""
        if not self.external_host:
            return ""
        return f"tcp://{self.external_host}:{self.external_port or self.port}"

    @property
    def local_address(self) -> str:
        """The client endpoint as dialled on the broker's own host (probes)."""
        host = "127.0.0.1" if self.listen_host in ANY_HOSTS else self.listen_host
        return f"tcp://{host}:{self.port}"

    @property
    def ha_address(self) -> str:
        """The ZeroMQ endpoint slaves dial for replication."""
        return f"tcp://{self.advertised_host or self.listen_host}:{self.ha_port}"

    @property
    def max_ack_wait_ms(self) -> int:
        """Longest a broker may hold a send before answering it."""
        wait = self.sync_flush_timeout_ms if self.flush is FlushDiskType.SYNC_FLUSH else 0
        if self.replication is ReplicationMode.SYNC:
            wait += self.slave_timeout_ms
        return wait

    def replace(self, **changes) -> BrokerConfig:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | None = None, env: dict | None = None,
             overrides: dict | None = None) -> BrokerConfig:
        """File, then ``DUOMQ_*`` environment, then explicit overrides.

        The file holds a ``[broker]`` table for every broker and, optionally, a
        ``[groups.<group>]`` table per broker group layered over it, so that one
        file (one ConfigMap) sets each group's flush and replication modes."""
        file_values: dict[str, Any] = {}
        sections: dict[str, dict] = {}
        if path:
            try:
                with open(path, "rb") as f:
                    data = tomllib.load(f)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"config file {path}: {exc}") from None
            sections = data.pop("groups", {})
            data = data.get("broker", data)
            _check_known(cls, data, f"config file {path}")
            file_values.update(data)
            for name, section in sections.items():
                validate_name(f"config file {path}: [groups] table", name)
                if not isinstance(section, dict):
                    raise ConfigError(f"config file {path}: groups.{name} is not a table")
                _check_known(cls, section, f"config file {path}: [groups.{name}]")
                fixed = sorted(set(section) & {"group", "broker_id", "pod_name"})
                if fixed:
                    raise ConfigError(f"config file {path}: [groups.{name}] sets "
                                      f"{', '.join(fixed)}: a group table cannot move a "
                                      f"broker to another group")
        environ: Mapping[str, str] = os.environ if env is None else env
        later: dict[str, Any] = {}
        for f_ in fields(cls):
            key = "DUOMQ_" + f_.name.upper()
            if key in environ:
                later[f_.name] = _coerce(f_, environ[key], key)
        later.update((k, v) for k, v in (overrides or {}).items() if v is not None)
        _check_known(cls, later, "config")
        values = {**file_values, **later}
        identity: dict[str, Any] = {}
        if values.get("pod_name"):
            group, ordinal = parse_pod_name(values["pod_name"])
            identity = {"group": group, "broker_id": ordinal}
            for field_, derived in identity.items():
                given = values.get(field_)
                if given is not None and str(given) != str(derived):
                    raise ConfigError(
                        f"{field_} {given!r} contradicts pod_name {values['pod_name']!r}, "
                        f"which makes it {derived!r}: set one of them")
        group = identity.get("group", values.get("group", cls.group))
        return cls(**{**file_values, **sections.get(group, {}), **later, **identity})


def parse_pod_name(name: str) -> tuple[str, int]:
    """A StatefulSet pod's name, ``<statefulset>-<ordinal>``, as (broker group,
    broker id): the pod ``broker-a-1`` is broker 1 of group ``broker-a``."""
    group, sep, ordinal = str(name).strip().rpartition("-")
    if not sep or not group or not ordinal.isdigit():
        raise ConfigError(f"pod_name {name!r} is not <statefulset>-<ordinal>")
    return group, int(ordinal)
