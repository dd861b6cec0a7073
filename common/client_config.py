"""The clients' configuration: a producer's, a consumer's (pull and push)
and a share consumer's, one frozen dataclass each, validated as the
broker's is (``common.config``), with an error that names the field."""

from __future__ import annotations

from dataclasses import dataclass

from duomq.common.config import ALLOCATE_STRATEGIES, MIB
from duomq.common.config_fields import (
    _check_client_transport,
    _check_metrics_port,
    _positive,
    check_types,
)
from duomq.common.errors import ConfigError
from duomq.common.names import validate_name


@dataclass(frozen=True)
class ProducerConfig:
    """A producer's settings. Times in ms."""

    group: str = "DEFAULT_PRODUCER"          # producer group name
    send_timeout_ms: int = 10_000            # must exceed the brokers' flush + slave timeouts
    retry_times_when_send_failed: int = 2    # extra attempts, each on another broker group
    retry_another_broker_when_not_store_ok: bool = False  # retry FLUSH_*/SLAVE_* results too
    max_message_bytes: int = 4 * MIB         # refuse larger messages before sending
    batch_max_messages: int = 1024           # most messages in one send_batch request
    fault_avoidance_ms: int = 5000           # avoid a broker group this long after it failed a send
    metrics_port: int = -1                   # Prometheus /metrics here (0: a free port, -1: none)
    metrics_host: str = "0.0.0.0"            # ... listening on this address
    credentials: str = ""                    # a secured cluster's credentials file ($DUOMQ_CREDENTIALS)
    external: bool = False                   # dial brokers at the external addresses they
                                             # register (external_host): a client outside their
                                             # network (also: $DUOMQ_EXTERNAL=true)
    transport: str = "auto"                  # "native": its own ZMTP sockets (no I/O-thread
                                             # hop), "zeromq": libzmq's, "auto": native without
                                             # credentials (also $DUOMQ_TRANSPORT)
    busy_poll_us: int = 250                  # a send spins this long on its answer before it
                                             # sleeps (native; adaptive, as the broker's; 0: off;
                                             # an ASYNC pair answers in ~150-200 us)
    idempotent: bool = True                  # number batches per queue: a retried send is
                                             # stored once (retries stay on the first queue)
    producer_id: int = 0                     # the identity batches are numbered under (0: a
                                             # random one). A producer given an id used before
                                             # numbers from 0 again: its batches count as the
                                             # earlier ones (a deterministic rerun, as the
                                             # Spark sink's); never reuse one for new data

    def __post_init__(self):
        check_types(self)
        validate_name("producer group", self.group)
        if not 0 <= self.producer_id < 1 << 63:
            raise ConfigError("producer_id: must be in 0..2**63-1 (0: a random one)")
        _positive(self, "send_timeout_ms", "max_message_bytes", "batch_max_messages")
        if self.fault_avoidance_ms < 0:
            raise ConfigError("fault_avoidance_ms: must be >= 0")
        if self.retry_times_when_send_failed < 0:
            raise ConfigError("retry_times_when_send_failed: must be >= 0")
        _check_metrics_port(self.metrics_port)
        _check_client_transport(self.transport)

    def check_broker(self, group: str, max_ack_wait_ms: int) -> None:
        """Refuse a broker group whose longest ack wait reaches our send timeout."""
        wait = max_ack_wait_ms
        if self.send_timeout_ms <= wait:
            raise ConfigError(
                f"send_timeout_ms ({self.send_timeout_ms}) must exceed the flush and slave "
                f"timeouts of broker group {group!r} ({wait} ms: "
                f"sync_flush_timeout_ms + slave_timeout_ms), or its answer would never arrive")


@dataclass(frozen=True)
class ConsumerConfig:
    """A consumer's settings. Times in ms."""

    group: str = "DEFAULT_CONSUMER"          # consumer group name
    consume_from: str = "last"               # new group starts at: last | first | timestamp
    consume_timestamp_ms: int = 0            # with consume_from=timestamp
    pull_batch_size: int = 256               # most messages per pull
    long_polling_timeout_ms: int = 15_000    # how long a pull may wait at the broker
    offset_commit_interval_ms: int = 5000    # commit consumed offsets this often
    request_timeout_ms: int = 10_000         # non-pull requests
    pull_threshold_for_queue: int = 1000     # stop pulling a queue with this many unconsumed
    pull_threshold_size_for_queue_mib: int = 100  # ... or with this many MiB of bodies unconsumed
    read_from: str = "master"                # master | slave | slave_preferred
    max_replica_lag_ms: int = 0              # read from a slave only while it lags its master by
                                             # at most this much (0: no bound)
    allocate_strategy: str = "average"       # average | circle | consistent_hash (or pass
                                             # a function to PushConsumer(allocate=...))
    rebalance_interval_ms: int = 20_000      # rebalance this often besides on membership watches
    message_model: str = "clustering"        # clustering: the group shares the queues;
                                             # broadcasting: every member reads every message
    offset_store_dir: str = ""               # broadcasting: local offset files (~/.duomq/offsets)
    instance_name: str = ""                  # broadcasting: this member's offset file name
                                             # (default: the host name)
    consume_mode: str = "concurrently"       # concurrently: a thread pool, any order;
                                             # orderly: one thread per queue, queue order
    consume_threads: int = 20                # consume thread pool size (0: the handler runs
                                             # on the I/O thread as each answer comes: no
                                             # hand-off, but a slow one holds up every pull)
    consume_concurrently_max_span: int = 2000  # concurrently: stop pulling a queue whose oldest
                                             # unconsumed message is this many offsets back
    suspend_current_queue_ms: int = 1000     # pause before a failed message is tried again here
    max_reconsume_times: int = 16            # retries before a message goes to %DLQ%<group>
    handoff_timeout_ms: int = 10_000         # a queue handed to another member: longest spent
                                             # consuming the messages in hand before its
                                             # position is committed and it is let go
    metrics_port: int = -1                   # Prometheus /metrics here (0: a free port, -1: none)
    metrics_host: str = "0.0.0.0"            # ... listening on this address
    credentials: str = ""                    # a secured cluster's credentials file ($DUOMQ_CREDENTIALS)
    external: bool = False                   # dial brokers at the external addresses they
                                             # register (external_host): a client outside
                                             # their network (also: $DUOMQ_EXTERNAL=true)
    transport: str = "auto"                  # native, zeromq or auto (as ProducerConfig's)

    def __post_init__(self):
        check_types(self)
        validate_name("consumer group", self.group)
        if self.message_model not in ("clustering", "broadcasting"):
            raise ConfigError(f"message_model: {self.message_model!r} is not clustering or "
                              f"broadcasting")
        if self.instance_name:
            validate_name("instance", self.instance_name)
        if self.allocate_strategy not in ALLOCATE_STRATEGIES:
            raise ConfigError(f"allocate_strategy: {self.allocate_strategy!r} is not one of "
                              f"{', '.join(ALLOCATE_STRATEGIES)}")
        if self.consume_mode not in ("concurrently", "orderly"):
            raise ConfigError(f"consume_mode: {self.consume_mode!r} is not concurrently or orderly")
        if self.max_reconsume_times < 0:
            raise ConfigError("max_reconsume_times: must be >= 0")
        if self.consume_threads < 0:
            raise ConfigError("consume_threads: must be >= 0 (0: the handler runs on the "
                              "client's I/O thread)")
        if self.read_from not in ("master", "slave", "slave_preferred"):
            raise ConfigError(f"read_from: {self.read_from!r} is not master, slave or "
                              f"slave_preferred")
        if self.consume_from not in ("last", "first", "timestamp"):
            raise ConfigError(f"consume_from: {self.consume_from!r} is not last, first or timestamp")
        _positive(self, "pull_batch_size", "long_polling_timeout_ms", "offset_commit_interval_ms",
                  "request_timeout_ms", "pull_threshold_for_queue", "rebalance_interval_ms",
                  "pull_threshold_size_for_queue_mib",
                  "consume_concurrently_max_span", "suspend_current_queue_ms",
                  "handoff_timeout_ms")
        if self.request_timeout_ms <= 0:
            raise ConfigError("request_timeout_ms: must be > 0")
        if self.max_replica_lag_ms < 0:
            raise ConfigError("max_replica_lag_ms: must be >= 0 (0: no bound)")
        _check_metrics_port(self.metrics_port)
        _check_client_transport(self.transport)


@dataclass(frozen=True)
class SimpleConsumerConfig:
    """A share group's consumer (``SimpleConsumer``): no queues of its own;
    the brokers hand each message to one consumer at a time. Times in ms."""

    group: str = "DEFAULT_CONSUMER"          # share group name
    invisible_duration_ms: int = 30_000      # a received message is this consumer's this long
    max_deliveries: int = 16                 # deliveries before a message not acked goes to
                                             # %DLQ%<group> (RocketMQ's maxReconsumeTimes)
    consume_from: str = "last"               # a queue the group never read starts at:
                                             # last (what is sent from now on) | first
    long_polling_timeout_ms: int = 15_000    # longest receive(wait_ms) is held at a broker
    request_timeout_ms: int = 10_000         # acks and other requests
    slave_reads: bool = True                 # a cold backlog's messages are read from the slave
                                             # the master names (the master's, as handed out)
    max_replica_lag_ms: int = 0              # ... while it lags its master by at most this
                                             # much (0: no bound); else from the master
    credentials: str = ""                    # a secured cluster's credentials file ($DUOMQ_CREDENTIALS)
    external: bool = False                   # dial brokers at their external addresses
    transport: str = "auto"                  # native, zeromq or auto (as ProducerConfig's)
    metrics_port: int = -1                   # Prometheus /metrics here (0: a free port, -1: none)
    metrics_host: str = "0.0.0.0"            # ... listening on this address

    def __post_init__(self):
        check_types(self)
        validate_name("consumer group", self.group)
        if self.consume_from not in ("last", "first"):
            raise ConfigError(f"consume_from: {self.consume_from!r} is not last or first")
        if not 100 <= self.invisible_duration_ms <= 12 * 3600 * 1000:
            raise ConfigError(f"invisible_duration_ms: {self.invisible_duration_ms} is outside "
                              f"100 ms .. 12 h")
        if not 1 <= self.max_deliveries <= 1000:
            raise ConfigError(f"max_deliveries: {self.max_deliveries} is outside 1..1000")
        _positive(self, "long_polling_timeout_ms", "request_timeout_ms")
        _check_metrics_port(self.metrics_port)
        _check_client_transport(self.transport)
