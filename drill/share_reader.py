"""One share-group reader of a drill (``python -m duomq.drill.share_reader
ZOOKEEPER CLUSTER TOPIC GROUP INVISIBLE_MS``): a SimpleConsumer receiving
and acking until killed, one JSON line per event on stdout, flushed as it
happens so that a kill -9 loses none it printed:

  {"k": "d", "b": body, "n": delivery count, "m": message id}   received
  {"k": "i", "b": ..., "n": ..., "m": ...}     about to ack (killed before its outcome
                                               printed: the ack may have been taken)
  {"k": "a", "b": ..., "n": ...}               acked (the broker said so)
  {"k": "r", "b": ..., "n": ...}               ack refused (RECEIPT_EXPIRED)
  {"k": "u", "b": ..., "n": ...}               ack without an answer: unknown

Bodies are the drill's, ASCII."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from duomq.client import SimpleConsumer
from duomq.common.errors import DuomqError, ReceiptExpiredError


def main(argv: list[str]) -> int:
    zookeeper, cluster, topic, group, invisible_ms = argv
    logging.basicConfig(level=logging.ERROR)
    out = sys.stdout

    def say(kind: str, m) -> None:
        out.write(json.dumps({"k": kind, "b": m.body.decode(), "n": m.delivery_count,
                              "m": m.msg_id}) + "\n")
        out.flush()

    parent = os.getppid()
    with SimpleConsumer(group, subscriptions=topic, zookeeper=zookeeper, cluster=cluster,
                        consume_from="first", invisible_duration_ms=int(invisible_ms)) as c:
        while os.getppid() == parent:      # the drill gone: stop, never read on unwatched
            try:
                msgs = c.receive(16, wait_ms=500)
            except DuomqError:
                time.sleep(0.1)            # a failover: the route comes back
                continue
            for m in msgs:
                say("d", m)
            for m in msgs:                 # one at a time: each outcome known alone
                say("i", m)
                try:
                    c.ack(m)
                    say("a", m)
                except ReceiptExpiredError:
                    say("r", m)
                except DuomqError:
                    say("u", m)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
