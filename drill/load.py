"""The drill's workload: producer threads sending unique bodies and
journaling every outcome, a consumer group reading along, and the audit that
reads every queue of the topic back at the end."""

from __future__ import annotations

import collections
import threading
import time
import uuid

from duomq.client import (
    Message,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    SendStatus,
    TransactionProducer,
    TransactionState,
)
from duomq.common.errors import DuomqError, RequestTimeoutError
from duomq.drill.checker import ACKED, Op

STORED = {SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT,
          SendStatus.SLAVE_NOT_AVAILABLE}


def outcome_of_result(result) -> str:
    if result.status is SendStatus.SEND_OK:
        return "degraded" if result.degraded else "ok"
    return "stored" if result.status in STORED else "failed"


def outcome_of_error(exc: BaseException) -> str:
    """No answer (a timeout, a dead or abandoned connection): the send may
    have been stored. A refusal (an error status): nothing was."""
    if isinstance(exc, RequestTimeoutError):
        return "unknown"
    if isinstance(exc, DuomqError) and getattr(exc, "status", None) is not None \
            and not getattr(exc, "retriable", False):
        return "failed"
    return "unknown"


DELAY_LEVEL = 1            # the mixed load's delayed messages: the first level (1 s by default)
DELAY_S = 1.0


def timer_delay_s(seq: int) -> float:
    """The mixed load's timer messages: due 0.3 to 3 s after they are sent."""
    return 0.3 + (seq * 7919) % 2700 / 1000


class Workload:
    """``producers`` threads, each with its own Producer, sending one message
    at a time (bodies ``<run>-<worker>-<seq>``); with ``ordered`` each worker
    keeps one queue (a sharding key), so per-queue order can be checked.
    ``consumers`` PushConsumer members of one group read along. ``mixed``:
    beside them, one thread sending delayed messages (delay level 1), one
    sending timer messages (each at a time 0.3 to 3 s ahead) and one sending
    transactional ones (each committed by its local transaction), journaled
    alike (a delayed message is due ``DELAY_S`` after its ack, a timer at its
    time; a transaction is acked when its half was and its commit answered)."""

    def __init__(self, zookeeper: str, cluster: str, topic: str, *, producers: int = 2,
                 consumers: int = 1, ordered: bool = False, mixed: bool = False,
                 **producer_settings):
        self.zookeeper, self.cluster, self.topic = zookeeper, cluster, topic
        self.run_id = uuid.uuid4().hex[:8]
        self.ordered = ordered
        self.settings = producer_settings
        self.ops: list[Op] = []
        self.delivered = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        kinds = ["plain"] * producers + (["delayed", "timer", "transactional"] if mixed else [])
        self.threads = [threading.Thread(target=self._work, args=(w, kind), daemon=True,
                                         name=f"drill-producer-{w}")
                        for w, kind in enumerate(kinds)]
        self.n_consumers = consumers
        self.consumers: list[PushConsumer] = []

    # ------------------------------------------------------------ lifecycle
    def start(self) -> Workload:
        for _ in range(self.n_consumers):
            c = PushConsumer(f"drill-{self.run_id}", topic=self.topic, on_message=self._consumed,
                             zookeeper=self.zookeeper, cluster=self.cluster, consume_from="first")
            c.start()
            self.consumers.append(c)
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(60)
        for c in self.consumers:
            c.shutdown()

    def _consumed(self, _msg) -> None:
        with self.lock:
            self.delivered += 1

    def _work(self, worker: int, kind: str = "plain") -> None:
        prefix = f"{self.run_id}-{worker}-"
        key = f"drill-{worker}" if self.ordered else None
        transactional = kind == "transactional"
        if transactional:        # a check-back (its end lost): it committed
            client: Producer = TransactionProducer(
                f"drill-{self.run_id}-tx", checker=lambda _m: TransactionState.COMMIT,
                zookeeper=self.zookeeper, cluster=self.cluster, **self.settings)
        else:
            client = Producer(f"drill-{self.run_id}", zookeeper=self.zookeeper, cluster=self.cluster,
                              **self.settings)
        with client as p:
            seq = 0
            while not self.stopping.is_set():
                body = (prefix + f"{seq:09d}").encode()
                started = time.monotonic()
                group, epoch, queue, offset, msg_id, foreign = "", 0, -1, -1, "", False
                ahead = timer_delay_s(seq) if kind == "timer" else 0.0
                try:
                    msg = Message(self.topic, body, delay_level=DELAY_LEVEL
                                  if kind == "delayed" else 0,
                                  deliver_at_ms=int((time.time() + ahead) * 1000) if ahead else 0)
                    if isinstance(p, TransactionProducer):
                        t = p.send_in_transaction(msg, _commit, sharding_key=key)
                        r = t.send_result
                        outcome, status = outcome_of_result(r), r.status.value
                        if outcome in ACKED and (t.error or t.local_state
                                                 is not TransactionState.COMMIT):
                            outcome, status = "unknown", f"end not confirmed: {t.error}"
                    else:
                        r = p.send(msg, sharding_key=key)
                        outcome, status = outcome_of_result(r), r.status.value
                    group, epoch, queue = r.broker_group, r.epoch, r.queue.queue_id
                    offset = r.physical_offsets[0] if r.physical_offsets else -1
                    msg_id = r.msg_id if kind == "plain" else ""   # a timer's, a half's: moved
                except Exception as exc:
                    outcome, status = outcome_of_error(exc), type(exc).__name__
                    foreign = not isinstance(exc, DuomqError)
                ended = time.monotonic()
                due = ended + DELAY_S if kind == "delayed" else started + ahead if ahead else 0.0
                op = Op(body, worker, seq, started, ended, outcome, status, group,
                        epoch, queue, offset, msg_id, foreign, kind, due)
                with self.lock:
                    self.ops.append(op)
                if outcome not in ACKED:
                    time.sleep(0.02)         # an error: do not spin
                seq += 1

    # ------------------------------------------------------------ views
    def journal(self) -> list[Op]:
        with self.lock:
            return list(self.ops)

    def acked_since(self, t: float) -> int:
        with self.lock:
            return sum(1 for op in reversed(self.ops) if op.ended >= t and op.outcome in ACKED)

    def first_ack_after(self, t: float) -> float | None:
        """When the first send started after ``t`` was acked."""
        with self.lock:
            done = [op.ended for op in self.ops if op.started >= t and op.outcome in ACKED]
        return min(done) if done else None

    def first_refusal_after(self, t: float) -> float | None:
        """When the first send started after ``t`` came back without an ack."""
        with self.lock:
            done = [op.ended for op in self.ops if op.started >= t and op.outcome not in ACKED]
        return min(done) if done else None

    def first_stored_after(self, t: float, epoch: int | None = None) -> float | None:
        """When the first send started after ``t`` was stored (acked or
        not), by the master of ``epoch`` when given."""
        with self.lock:
            done = [op.ended for op in self.ops if op.started >= t
                    and (epoch is None or op.epoch == epoch) and op.outcome in (*ACKED, "stored")]
        return min(done) if done else None

    def acked(self) -> int:
        with self.lock:
            return sum(1 for op in self.ops if op.outcome in ACKED)

    def statuses(self) -> dict[str, int]:
        """How many sends got each answer (status or error name)."""
        with self.lock:
            return dict(collections.Counter(op.status for op in self.ops))

    def answered(self, outcomes: tuple[str, ...] = ACKED) -> list[float]:
        """When each send with one of ``outcomes`` was answered, in order."""
        with self.lock:
            return sorted(op.ended for op in self.ops if op.outcome in outcomes)

    def last_ack_before(self, t: float) -> float | None:
        """When the last ack answered before ``t`` arrived."""
        with self.lock:
            done = [op.ended for op in self.ops if op.ended <= t and op.outcome in ACKED]
        return max(done) if done else None

    def last_status(self) -> str:
        with self.lock:
            return self.ops[-1].status if self.ops else ""


def _commit(_msg, _arg) -> TransactionState:
    return TransactionState.COMMIT


class FaultReader:
    """Reads the topic back while a round's fault is still in place (a
    drill that read only after the heal never saw an acked message that the
    new master held but did not show). Made before the first fault, with
    the topic's queues then: a read asks ZooKeeper nothing (an outage
    scenario pauses it, and a read waiting on it would wait for the heal).
    Each queue is read from its master and, where the master cannot be
    reached (clients cut from it), from a slave: a message counts as
    readable when a consumer can read it somewhere."""

    def __init__(self, zookeeper: str, cluster: str, topic: str, prefix: bytes):
        self.topic, self.prefix = topic, prefix
        group = f"drill-audit-{uuid.uuid4().hex[:6]}"
        self.masters = PullConsumer(group, zookeeper=zookeeper, cluster=cluster)
        self.slaves = PullConsumer(group, zookeeper=zookeeper, cluster=cluster, read_from="slave_preferred")
        self.mqs = self.masters.queues(topic)
        for c in (self.masters, self.slaves):        # their members' watches, set now
            for g in {mq.broker_group for mq in self.mqs}:
                c.members.of(g)

    def unreadable(self, acked: set[bytes], patience_s: float) -> set[bytes]:
        """Which of ``acked`` a new reader does not find, reading every queue
        from its first offset again until all are found or ``patience_s``
        (a route still moving to the new master) has passed."""
        missing = set(acked)
        deadline = time.monotonic() + patience_s
        while missing:
            for mq in self.mqs:
                for c in (self.masters, self.slaves):
                    try:
                        missing -= set(_read_queue(c, mq))
                        break
                    except DuomqError:
                        continue          # not reachable there: counted if it stays so
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        return missing

    def close(self) -> None:
        self.masters.close()
        self.slaves.close()


def read_back(zookeeper: str, cluster: str, topic: str, patience_s: float = 0.0,
              ids: dict[str, bytes] | None = None) -> list[tuple[int, bytes]]:
    """Every body stored in ``topic``, queue by queue from each group's
    master: ``(queue index, body)`` in each queue's order; ``ids``: filled
    with each message's id and body. A read that fails retriably (ZooKeeper
    or a master briefly unreachable after a fault) starts again for up to
    ``patience_s``."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            if ids is not None:
                ids.clear()
            return _read_back(zookeeper, cluster, topic, ids)
        except DuomqError as exc:
            if not exc.retriable or time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def _read_back(zookeeper: str, cluster: str, topic: str,
               ids: dict[str, bytes] | None = None) -> list[tuple[int, bytes]]:
    with PullConsumer(f"drill-audit-{uuid.uuid4().hex[:6]}", zookeeper=zookeeper, cluster=cluster) as c:
        return _read_queues(c, topic, ids)


def _read_queues(c: PullConsumer, topic: str,
                 ids: dict[str, bytes] | None = None) -> list[tuple[int, bytes]]:
    return [(i, body) for i, mq in enumerate(c.queues(topic))
            for body in _read_queue(c, mq, ids)]


def _read_queue(c: PullConsumer, mq, ids: dict[str, bytes] | None = None) -> list[bytes]:
    out: list[bytes] = []
    off = c.min_offset(mq)
    while (r := c.pull(mq, off, 1000)).status is PullStatus.FOUND:
        out.extend(m.body for m in r.messages)
        if ids is not None:
            ids.update((m.msg_id, m.body) for m in r.messages)
        off = r.next_offset
    return out
