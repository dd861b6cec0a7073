"""``duomq consume TOPIC --group G``: a push consumer in the group;
``--share G``: a consumer of share group G (``SimpleConsumer``), acking each
message it prints; or, without a group, ``--queue Q [--offset O] --count
N``: a look at one queue from an offset (as ``kcat -C -o O -c N``), which
commits nothing."""

from __future__ import annotations

import json
import sys
import threading
import time

from duomq.cli.common import (
    add_endpoint,
    add_json,
    add_metrics_port,
    emit,
    endpoint,
    message_json,
    say_metrics,
    time_arg,
)
from duomq.client import PushConsumer
from duomq.common.errors import ConfigError

WAIT_HINT_S = 1.0          # nothing received this long from the end: say why it waits


def waiting_hint(kind: str) -> str:
    """The line a consume that starts at the end prints once while nothing
    comes (a new group has nothing to read until a message is sent)."""
    return (f"waiting for new messages: a new {kind} starts at the end of each queue "
            f"(--from first reads what is stored already; Ctrl-C stops)")


def add(sub) -> None:
    p = sub.add_parser("consume", help="consume a topic as a member of a consumer group, or "
                       "look at one queue from an offset (--queue, no group)")
    p.add_argument("topic")
    p.add_argument("--group", help="consumer group (required unless --queue or --share)")
    p.add_argument("--share", metavar="GROUP",
                   help="consume as a member of share group GROUP: any number of members read "
                        "every queue; each message printed is acked (--count N: exactly N)")
    p.add_argument("--invisible-ms", type=int, default=30_000, metavar="MS",
                   help="with --share: a received message is this consumer's this long "
                        "(default 30000)")
    p.add_argument("--max-deliveries", type=int, default=16, metavar="N",
                   help="with --share: deliveries of a message before it goes to %%DLQ%%<group> "
                        "(default 16)")
    p.add_argument("--queue", metavar="[GROUP/]ID",
                   help="without a group: read this queue from --offset, commit nothing")
    p.add_argument("--offset", type=int, metavar="O",
                   help="with --queue: the first offset read (default: the queue's first)")
    p.add_argument("--format", choices=["auto", "text", "hex", "base64"], default="auto",
                   help="how bodies print: auto (text when it is UTF-8, else base64), text "
                        "(undecodable bytes replaced), hex or base64")
    p.add_argument("--from", dest="from_", choices=["first", "last", "timestamp"],
                   default="last", help="where a new group (or share group) starts: last "
                   "(default: only messages sent from now on), first (what is stored "
                   "already) or timestamp (the first message stored at or after "
                   "--timestamp); a group goes on from its committed offsets")
    p.add_argument("--timestamp", type=time_arg, metavar="TIME",
                   help="with --from timestamp: epoch ms, ISO 8601 (2026-11-22T10:00, local "
                        "unless it names a zone) or a time ago (30m, 2h, 1d)")
    p.add_argument("--orderly", action="store_true",
                   help="orderly consumption: one thread per queue, in queue order, each queue "
                        "locked on its master")
    p.add_argument("--until-idle", type=float, metavar="SECONDS",
                   help="stop after this long with no message")
    p.add_argument("--count", type=int, metavar="N",
                   help="stop after N messages: exactly N are printed and committed, the rest "
                        "of what was pulled stays for the group")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.add_argument("--read-from", choices=["master", "slave", "slave_preferred"], default="master",
                   help="where reads go (default master, following the brokers' read advice)")
    p.add_argument("--max-replica-lag-ms", type=int, default=0, metavar="MS",
                   help="read from a slave only while it lags its master by at most MS "
                        "(default 0: no bound)")
    p.add_argument("--tags", default="*", metavar="EXPRESSION",
                   help="subscription: `*` (default) or `TagA || TagB`")
    add_metrics_port(p)
    add_endpoint(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if (args.from_ == "timestamp") != (args.timestamp is not None):
        print("error: --from timestamp and --timestamp TIME go together", file=sys.stderr)
        return 2
    if args.count is not None and args.count < 1:
        print(f"error: --count must be at least 1, got {args.count}", file=sys.stderr)
        return 2
    if args.until_idle is not None and args.until_idle <= 0:
        print(f"error: --until-idle must be above 0, got {args.until_idle:g}", file=sys.stderr)
        return 2
    if args.share is not None:
        return share(args)
    if args.queue is not None:
        return peek(args)
    if not args.group:
        print("error: --group GROUP is needed (or --queue Q to look at one queue without a "
              "group)", file=sys.stderr)
        return 2
    zookeeper, cluster = endpoint(args)
    lock = threading.Lock()
    state = {"n": 0, "last": time.monotonic()}
    done = threading.Event()
    out = sys.stdout

    def on_message(m):
        with lock:
            state["n"] += 1
            state["last"] = time.monotonic()
            if not args.quiet:
                if args.json:
                    out.write(json.dumps(message_json(m)) + "\n")
                else:
                    out.write(line(m, args.format))
            if args.count and state["n"] >= args.count:
                consumer.halt()          # this message is the last one handed over
                done.set()

    t0 = time.monotonic()
    consumer = PushConsumer(args.group, topic=args.topic, on_message=on_message, zookeeper=zookeeper,
                            cluster=cluster, consume_from=args.from_, read_from=args.read_from,
                            subscription=args.tags, consume_timestamp_ms=args.timestamp or 0,
                            consume_mode="orderly" if args.orderly else "concurrently",
                            max_replica_lag_ms=args.max_replica_lag_ms,
                            metrics_port=args.metrics_port,
                            # a count is exact with one consume thread: what is consumed
                            # of each queue is then a prefix, and committed as such
                            **({"consume_threads": 1} if args.count else {}))
    say_metrics(consumer)
    consumer.start()
    hint = args.from_ == "last" and not args.quiet
    try:
        while not done.wait(0.1):
            if hint and not state["n"] and time.monotonic() - t0 >= WAIT_HINT_S:
                print(waiting_hint("group"), file=sys.stderr, flush=True)
                hint = False
            if args.until_idle and time.monotonic() - state["last"] > args.until_idle:
                break
    except KeyboardInterrupt:
        pass
    finally:
        consumer.shutdown()
    out.flush()
    summary = {"summary": True, "topic": args.topic, "group": args.group, "consumed": state["n"],
               "seconds": round(time.monotonic() - t0, 3), "client_id": consumer.client_id,
               "pulls_by_broker": {f"{g}/{b}": n for (g, b), n in
                                   sorted(consumer.reads_by_broker.items())},
               "replica_lag_ms": {f"{g}/{b}": v for (g, b), v in
                                  sorted(consumer.replica_lag_ms.items())},
               "handoffs": consumer.handoffs}
    emit(summary) if args.json else print(f"consumed {state['n']} messages", file=sys.stderr)
    return 0


def body_text(body: bytes, fmt: str, limit: int = 200) -> str:
    """A body as a person reads it: text when it is UTF-8 (``auto``), else
    ``base64:...``; or always text, hex or base64. At most ``limit``
    characters, then an ellipsis."""
    import base64
    if fmt in ("auto", "text"):
        try:
            text = body.decode()
        except UnicodeDecodeError:
            if fmt == "text":
                text = body.decode(errors="replace")
            else:
                text = "base64:" + base64.b64encode(body).decode()
    elif fmt == "hex":
        text = body.hex()
    else:
        text = base64.b64encode(body).decode()
    return text if len(text) <= limit else text[:limit] + "..."


def line(m, fmt: str) -> str:
    return f"{m.msg_id} {m.broker_group}/{m.queue_id}@{m.queue_offset} " \
           f"{body_text(m.body, fmt)}\n"


def peek(args) -> int:
    """Read one queue from an offset, as no group: nothing is committed."""
    from duomq.cli.produce_cmd import resolve_queue
    from duomq.client import PullConsumer
    from duomq.common.message import PullStatus
    zookeeper, cluster = endpoint(args)
    t0 = time.monotonic()
    n, idle_s = 0, args.until_idle or 1.0
    with PullConsumer("duomq-peek", zookeeper=zookeeper, cluster=cluster, read_from=args.read_from,
                      max_replica_lag_ms=args.max_replica_lag_ms) as c:
        mq = resolve_queue(c, args.topic, args.queue, writable=False)
        offset = c.min_offset(mq) if args.offset is None else args.offset
        quiet_since = time.monotonic()
        while not (args.count and n >= args.count):
            want = min(256, args.count - n) if args.count else 256
            r = c.pull(mq, offset, want, max_wait_ms=int(idle_s * 1000), subscription=args.tags)
            if r.status is PullStatus.OFFSET_ILLEGAL:
                raise ConfigError(f"offset {offset} is outside queue {args.queue}'s "
                                  f"[{r.min_offset}, {r.max_offset}]")
            for m in r.messages[:want]:
                n += 1
                if not args.quiet:
                    sys.stdout.write(json.dumps(message_json(m)) + "\n" if args.json
                                     else line(m, args.format))
            offset = r.next_offset if len(r.messages) <= want else r.messages[want].queue_offset
            if r.messages:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= idle_s:
                break
    sys.stdout.flush()
    summary = {"summary": True, "topic": args.topic, "queue": args.queue, "consumed": n,
               "next_offset": offset, "seconds": round(time.monotonic() - t0, 3)}
    emit(summary) if args.json else print(f"read {n} messages; next offset {offset}",
                                          file=sys.stderr)
    return 0


def share(args) -> int:
    """A member of share group ``--share``: acks, then prints, each message
    it receives (a count is exact: no more is received than is left to
    print)."""
    from duomq.client import SimpleConsumer
    from duomq.common.errors import ReceiptExpiredError
    wrong = [flag for flag, given in (("--group", args.group), ("--queue", args.queue),
                                      ("--orderly", args.orderly),
                                      ("--from timestamp", args.from_ == "timestamp"),
                                      ("--read-from", args.read_from != "master"))
             if given]
    if wrong:
        print(f"error: --share does not take {', '.join(wrong)}", file=sys.stderr)
        return 2
    zookeeper, cluster = endpoint(args)
    t0 = time.monotonic()
    n, redelivered, idle_s = 0, 0, args.until_idle
    with SimpleConsumer(args.share, subscriptions={args.topic: args.tags}, zookeeper=zookeeper,
                        cluster=cluster, consume_from=args.from_,
                        invisible_duration_ms=args.invisible_ms,
                        max_deliveries=args.max_deliveries,
                        metrics_port=args.metrics_port) as c:
        say_metrics(c)
        quiet_since = time.monotonic()
        hint = args.from_ == "last" and not args.quiet
        try:
            while not (args.count and n >= args.count):
                want = min(32, args.count - n) if args.count else 32
                wait = 1000 if idle_s is None else max(1, int(min(idle_s, 1.0) * 1000))
                got = c.receive(want, wait_ms=wait)
                for m in got:
                    try:           # acked first: what is printed is exactly what was acked
                        c.ack(m)
                    except ReceiptExpiredError as exc:
                        print(f"not acked, so not printed (it is delivered again): {exc}",
                              file=sys.stderr)
                        continue
                    if not args.quiet:
                        sys.stdout.write(json.dumps({**message_json(m),
                                                     "delivery_count": m.delivery_count})
                                         + "\n" if args.json else line(m, args.format))
                    n += 1
                    redelivered += m.delivery_count > 1
                if got:
                    quiet_since = time.monotonic()
                    hint = False
                elif idle_s is not None and time.monotonic() - quiet_since >= idle_s:
                    break
                elif hint and not n and time.monotonic() - t0 >= WAIT_HINT_S:
                    print(waiting_hint("share group"), file=sys.stderr, flush=True)
                    hint = False
        except KeyboardInterrupt:
            pass
    sys.stdout.flush()
    summary = {"summary": True, "topic": args.topic, "share_group": args.share, "consumed": n,
               "redelivered": redelivered, "seconds": round(time.monotonic() - t0, 3)}
    emit(summary) if args.json else print(f"consumed and acked {n} messages", file=sys.stderr)
    return 0
