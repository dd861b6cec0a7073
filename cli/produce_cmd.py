"""``duomq produce TOPIC [BODY ...]``: bodies from arguments or stdin lines,
or ``--count N --size BYTES`` for load. With ``--verbose`` or ``--json`` one
line per message (its id, queue, queue offset and status); on a long run a
progress line on stderr every second (not with ``--quiet``); on Ctrl-C what
was sent and what failed. Exit 0 when every message is SEND_OK, 1 when one
was not, 130 when interrupted."""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

from duomq.cli.common import add_endpoint, add_json, add_metrics_port, emit, endpoint, say_metrics
from duomq.client import Message, Producer
from duomq.client.base import ClientBase
from duomq.client.producer.producer import BATCH_MAX_BYTES, SendResult
from duomq.common import duration, recall_handle
from duomq.common.errors import ConfigError
from duomq.common.message import MessageQueue

PROGRESS_S = 1.0          # a long run says how far it got this often (stderr)


def _positive(what: str, least: int = 1):
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}") \
                from None
        if n < least:
            raise argparse.ArgumentTypeError(f"{what} must be at least {least}, got {n}")
        return n
    return parse


def _property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--property takes NAME=VALUE, got {text!r}")
    return name, value


def _delay_ms(text: str) -> int:
    try:
        return duration.parse_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--delay: {exc}") from None


def _deliver_at(text: str) -> int:
    """--deliver-at: epoch milliseconds or ISO 8601 (local time unless it
    names a zone); a time ago is refused: that is what --delay is for."""
    import datetime
    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        return int(datetime.datetime.fromisoformat(t).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--deliver-at: not a time: {text!r} (epoch ms, or ISO 8601 such as "
            f"2026-12-05T09:30:00; for a time from now use --delay 37m)") from None


def add(sub) -> None:
    p = sub.add_parser("produce", help="send messages")
    p.add_argument("topic")
    p.add_argument("bodies", nargs="*", help="message bodies (default: stdin lines)")
    p.add_argument("--count", type=_positive("--count"), help="send N generated messages")
    p.add_argument("--size", type=_positive("--size", 0), default=100,
                   help="generated body size in bytes (100)")
    p.add_argument("--batch", type=_positive("--batch"), default=256,
                   help="messages per request (256; 1 = one by one)")
    p.add_argument("--tag", "--tags", dest="tags", default="", help="the messages' tag")
    p.add_argument("--key", "--keys", dest="keys", default="",
                   help="the messages' key (space-separated for several)")
    p.add_argument("--property", action="append", type=_property, default=[],
                   metavar="NAME=VALUE", help="a user property (repeatable)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", type=_delay_ms, metavar="DURATION",
                      help="deliver this long after it is sent (10s, 5m, 1h)")
    when.add_argument("--deliver-at", type=_deliver_at, metavar="TIME",
                      help="deliver at this time: epoch ms or ISO 8601 (2026-12-05T09:30; "
                           "local time unless it names a zone); a time past: at once")
    p.add_argument("--queue", metavar="[GROUP/]ID",
                   help="send to this queue (GROUP/ID, or ID when one broker group serves "
                        "the topic)")
    p.add_argument("--group", default="CLI_PRODUCER", help="producer group")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="one line per message: id, queue, queue offset, status")
    p.add_argument("--quiet", action="store_true",
                   help="only the summary: no line per message, no progress")
    add_metrics_port(p)
    add_endpoint(p)
    add_json(p)
    p.set_defaults(func=run, trailing="bodies")


def _bodies(args):
    if args.count is not None:
        pad = os.urandom(max(0, args.size - 12)).hex()[:max(0, args.size - 12)].encode()
        for i in range(args.count):
            yield (b"%012d" % i + pad)[:args.size]
    elif args.bodies:
        for b in args.bodies:
            yield b.encode()
    else:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\n")


def resolve_queue(client: ClientBase, topic: str, text: str,
                  writable: bool = True) -> MessageQueue:
    """``GROUP/ID`` or ``ID`` as a (writable, else readable) queue of
    ``topic``; a ConfigError names the queues there are."""
    route = client.route(topic)
    queues = route.queues(writable=True) if writable else route.queues(readable=True)
    group, _, qid = text.rpartition("/")
    groups = sorted({q.broker_group for q in queues})
    if not group:
        if len(groups) != 1:
            raise ConfigError(f"--queue {text}: topic {topic!r} is served by broker groups "
                              f"{', '.join(groups)}: name one as GROUP/ID")
        group = groups[0]
    want = MessageQueue(topic, group, int(qid) if qid.isdigit() else -1)
    if want not in queues:
        raise ConfigError(f"--queue {text}: topic {topic!r} has no such queue "
                          f"(its queues: {', '.join(f'{q.broker_group}/{q.queue_id}' for q in queues)})")
    return want


class Run:
    """What a produce run sent, failed and says as it goes."""

    def __init__(self, args):
        self.args = args
        self.statuses: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.t0 = self.last_progress = time.perf_counter()
        self.lines = (args.verbose or args.json) and not args.quiet

    @property
    def sent(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def result(self, batch: list[Message], r: SendResult) -> None:
        self.statuses[r.status.value] += len(batch)
        if self.lines:
            ids = r.msg_ids or [r.msg_id] * len(batch)
            for i, msg_id in enumerate(ids):
                offset = r.queue_offset + i if r.queue_offset >= 0 else -1
                line = {"msg_id": msg_id, "queue": f"{r.queue.broker_group}/{r.queue.queue_id}",
                        "queue_offset": offset, "status": r.status.value}
                if r.duplicate:
                    line["duplicate"] = True
                at = batch[i].deliver_at_ms if i < len(batch) else 0
                due = ""
                if at and r.deliver_at_ms:            # a timer: when, and what recalls it
                    line["deliver_at_ms"] = at
                    line["recall_handle"] = recall_handle.make(r.queue.topic, msg_id, at)
                    due = " due " + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at / 1000))
                print(json.dumps(line) if self.args.json else
                      f"{msg_id} {line['queue']}@{offset} {r.status.value}{due}")
        self.progress()

    def failure(self, batch: list[Message], exc: Exception) -> None:
        self.errors[type(exc).__name__] += len(batch)
        print(f"error: {len(batch)} message(s) not sent: {exc}", file=sys.stderr)
        self.progress()

    def progress(self) -> None:
        now = time.perf_counter()
        if self.args.quiet or now - self.last_progress < PROGRESS_S:
            return
        self.last_progress = now
        print(f"produce {self.args.topic}: {self.sent} sent, {self.failed} failed "
              f"({self.sent / (now - self.t0):.0f} msg/s)", file=sys.stderr, flush=True)

    def summary(self, interrupted: bool) -> dict:
        secs = time.perf_counter() - self.t0
        return {"summary": True, "topic": self.args.topic, "sent": self.sent,
                "failed": self.failed, "statuses": dict(self.statuses),
                "errors": dict(self.errors), "interrupted": interrupted,
                "seconds": round(secs, 3),
                "msgs_per_s": round(self.sent / secs, 1) if secs else None}


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    state = Run(args)
    properties = dict(args.property)
    deliver_in = args.delay
    deliver_at = args.deliver_at or 0
    interrupted = False
    with Producer(args.group, zookeeper=zookeeper, cluster=cluster,
                  metrics_port=args.metrics_port) as producer:
        say_metrics(producer)
        queue = resolve_queue(producer, args.topic, args.queue) if args.queue else None
        batch: list[Message] = []

        def flush():
            if not batch:
                return
            try:
                state.result(batch, producer.send_batch(batch, queue=queue))
            except Exception as exc:
                state.failure(batch, exc)
            batch.clear()

        size = 0
        try:
            for body in _bodies(args):
                batch.append(Message(args.topic, body, tags=args.tags, keys=args.keys,
                                     properties=dict(properties) if properties else None,
                                     deliver_at_ms=int(time.time() * 1000) + deliver_in
                                     if deliver_in else deliver_at))
                size += len(body)
                if len(batch) >= args.batch or size >= BATCH_MAX_BYTES:
                    flush()
                    size = 0
            flush()
        except KeyboardInterrupt:
            interrupted = True
    out = state.summary(interrupted)
    if args.json:
        emit(out)
    else:
        what = ", ".join(f"{k} {v}" for k, v in {**state.statuses, **state.errors}.items())
        print(f"{'interrupted: ' if interrupted else ''}sent {state.sent} messages to "
              f"{args.topic}, {state.failed} failed, in {out['seconds']:.2f} s"
              + (f" ({what})" if what else ""), file=sys.stderr if args.verbose else sys.stdout)
    if interrupted:
        return 130
    return 0 if not state.errors and set(state.statuses) <= {"SEND_OK"} else 1
