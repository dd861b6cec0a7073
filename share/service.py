"""A master's share groups (``share/handlers.py`` serves the requests): the
book (``share.book``) as the share log left it at promotion, what a pop
hands out, how receipts are judged, and the changes written to the share
log and applied. The caller checks the request and answers it, once what
``write`` stored is durable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from duomq.common.message import decode_records
from duomq.common.names import SHARE_LOG_TOPIC
from duomq.common.subscription import Subscription
from duomq.format import record as rec
from duomq.master import requeue
from duomq.share import book as share_book
from duomq.share.book import Held, ReceiptError, ShareBook, encode_op
from duomq.store.consume_queue import CQ_UNIT

DELIVERY_COUNT = "DELIVERY_COUNT"   # a dead-lettered message's deliveries (property)
_SIZE_QOFF = rec.fields("total_size", "queue_offset")
_TAGS = rec.fields("topic_len", "tags_len")
Stored = tuple[str, int, bytes]     # (topic, queue id, record) to store
SCAN_ENTRIES = 1024                 # consume-queue entries a slave-read pop looks at, at least


@dataclass
class Pop:
    """What a pop hands out and the changes that say so."""
    deadline: int
    records: list[bytes] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)      # each record's delivery count
    ops: list[dict] = field(default_factory=list)
    dead: list[Stored] = field(default_factory=list)     # copies for %DLQ%<group>
    slave: int | None = None                             # where ``remote`` is read
    remote: dict[int, list[list[int]]] = field(default_factory=dict)  # qid -> [offset, count]

    @property
    def given(self) -> int:
        return len(self.records) + sum(len(v) for v in self.remote.values())


@dataclass
class Judged:
    """A share ack's receipts judged: one status per receipt (None: it
    holds), and the changes for those that hold."""
    errors: list[str | None]
    ops: list[dict]
    until: int


READER_TTL_MS = 30_000      # a share group's consumer counts as reading it this long after a pop
MAX_READERS_SEEN = 1000     # consumers remembered per share group

class ShareService:
    def __init__(self, store, config, book: ShareBook | None = None):
        """``book``: the state as a slave kept it (its follower's, at the
        log's end); None: replayed from the share log now."""
        self.store = store
        self.config = config
        self.book = book if book is not None else share_book.replay(store)
        # group -> {consumer (user/client id) -> its last pop, ms}: who reads it lately
        self.readers_seen: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------ readers
    def heard_reader(self, group: str, who: str, now: int) -> None:
        seen = self.readers_seen.setdefault(group, {})
        if who not in seen and len(seen) >= MAX_READERS_SEEN:
            seen.pop(min(seen, key=seen.__getitem__))      # the longest silent
        seen[who] = now

    def left_reader(self, group: str, who: str) -> None:
        """A consumer of ``group`` closed (its leaving heartbeat)."""
        seen = self.readers_seen.get(group)
        if seen is not None:
            seen.pop(who, None)

    def readers(self, group: str, now: int) -> list[str]:
        """The consumers of ``group`` that popped within ``READER_TTL_MS``
        (a share group has no membership node: this is who reads it)."""
        seen = self.readers_seen.get(group, {})
        return sorted(w for w, at in seen.items() if now - at < READER_TTL_MS)

    # ------------------------------------------------------------ pops
    def plan_pop(self, group: str, topic: str, queues: int, want: int, invisible_ms: int,
                 most: int, from_first: bool, sub: Subscription, visible: int,
                 now: int, advice: Callable[[int], int | None] | None = None,
                 owner: str = "", receipt_key: int = 0) -> Pop:
        """The group's next messages of ``topic``: first those visible again
        (a message delivered ``most`` times goes to the dead-letter queue
        instead), then new ones from the window's end, queues in turn, at
        most ``want``, within the group's ``share_max_held`` and each
        queue's ``share_window``. New messages where ``advice`` (the read
        advice for a commit-log offset) names a slave are chosen from the
        consume queue alone and read there by the consumer (``remote``).
        Nothing is changed until ``write``."""
        cfg, store, book = self.config, self.store, self.book
        codes = None if sub.everything else sub.codes
        room = cfg.share_max_held - book.held_count(group)
        out = Pop(now + invisible_ms)
        first = book.turn(group, topic, queues)
        for qid in [(first + i) % queues for i in range(queues)]:
            if out.given >= want:
                break
            q = book.queue((group, topic, qid))
            cq = store.find_queue(topic, qid)
            if cq is None and q is None:
                continue
            if q is None:                        # the group's first pop of this queue
                start = nxt = cq.min_offset if from_first else cq.max_offset
            else:
                start, nxt = q.start, q.next
            before = nxt
            items: list[list[int]] = []
            gone: list[int] = []
            if q is not None:                     # messages visible again first
                for offset, h in q.due(now, want - out.given):
                    one = self._read_one(topic, qid, offset, visible)
                    if one is None:               # taken by retention: nothing to deliver
                        gone.append(offset)
                    elif h.count >= most:
                        out.dead.append(self._dead_letter(one, group, h))
                        gone.append(offset)
                    else:
                        out.records.append(one)
                        out.counts.append(h.count + 1)
                        items.append([offset, h.count + 1])
            n = min(want - out.given, cfg.share_window - (nxt - start), room - len(items))
            slave = self._cold(cq, nxt, advice, out.slave) if n > 0 and cq is not None else None
            if slave is not None:
                assert cq is not None
                out.slave = slave
                chosen, nxt = self._from_queue(cq, nxt, n, codes, visible)
                out.remote.setdefault(qid, []).extend(chosen)
                items += chosen
            elif n > 0 and cq is not None:
                got = store.get_messages(topic, qid, nxt, n, cfg.max_pull_bytes, visible, codes)
                for one, offset, tags in records_of(got.records):
                    if sub.matches(tags):          # tag codes can collide: the tags decide
                        out.records.append(one)
                        out.counts.append(1)
                        items.append([offset, 1])
                nxt = max(nxt, got.next_offset)
            room -= len(items)
            if items or q is None or nxt != q.next:
                out.ops.append({"op": "pop", "g": group, "t": topic, "q": qid, "s": start,
                                "p": before, "n": nxt, "i": items, "d": out.deadline,
                                "a": now, "c": owner, "k": receipt_key})
            if gone:
                out.ops.append({"op": "dead", "g": group, "t": topic, "q": qid, "o": gone})
        return out

    @staticmethod
    def _cold(cq, nxt: int, advice, chosen: int | None) -> int | None:
        """The slave the new messages from ``nxt`` are read at, when the
        read advice names one (and it is the one this pop reads at)."""
        if advice is None:
            return None
        e = cq.entry(nxt)
        slave = advice(e[0]) if e is not None else None
        return slave if chosen is None or slave == chosen else None

    def _from_queue(self, cq, nxt: int, n: int, codes, visible: int
                    ) -> tuple[list[list[int]], int]:
        """Up to ``n`` visible entries from ``nxt`` whose tag code is
        subscribed (the consumer checks the tags themselves), read from the
        consume queue alone; and where the next pop goes on."""
        top = min(self.store.visible_max_offset(cq, visible), nxt + max(n, SCAN_ENTRIES))
        chosen: list[list[int]] = []
        while nxt < top and len(chosen) < n:
            raw = cq.read(nxt, top - nxt)
            if not raw:
                break
            for _phys, _size, code in CQ_UNIT.iter_unpack(raw):
                if codes is None or code in codes:
                    chosen.append([nxt, 1])
                nxt += 1
                if len(chosen) >= n:
                    break
        return chosen, nxt

    def _read_one(self, topic: str, qid: int, offset: int, visible: int) -> bytes | None:
        got = self.store.get_messages(topic, qid, offset, 1, 1 << 30, visible)
        for one, qoff, _tags in records_of(got.records):
            if qoff == offset:
                return one
        return None

    def _dead_letter(self, record: bytes, group: str, h: Held) -> Stored:
        msg = decode_records(record, self.config.group)[0]
        msg.properties[DELIVERY_COUNT] = str(h.count)
        return requeue.send_back(msg, group, (), 0, dead_letter=True)

    # ------------------------------------------------------------ acks
    def judge(self, group: str, topic: str, kind: str, receipts, ms: int, now: int,
              owner: str = "") -> Judged:
        """Each receipt ``(queue id, offset, delivery count, key)`` that
        still holds its message for ``owner`` gets the change ``kind`` (ack,
        release after ``ms``, renew for ``ms``); the others say why they do
        not hold."""
        errors: list[str | None] = []
        by_queue: dict[int, list[int]] = {}
        for qid, offset, count, rkey in receipts:
            try:
                self.book.check((group, topic, qid), offset, count, now, owner, rkey)
            except ReceiptError as exc:
                errors.append(str(exc))
                continue
            errors.append(None)
            by_queue.setdefault(qid, []).append(offset)
        until = now + ms
        ops = [{"op": kind, "g": group, "t": topic, "q": qid, "o": offsets,
                **({"d": until} if kind != "ack" else {})}
               for qid, offsets in sorted(by_queue.items())]
        return Judged(errors, ops, until)

    # ------------------------------------------------------------ changes
    def write(self, ops: list[dict], dead: list[Stored], now: int) -> int:
        """Store the dead letters, then the ops, and apply the ops (nothing
        is applied unless everything was stored); the end of what was
        written, for the answer to wait on."""
        items = list(dead) + [(SHARE_LOG_TOPIC, 0, rec.encode_record(
            SHARE_LOG_TOPIC.encode(), b"", b"", b"", encode_op(op), now, rec.NO_HOST, 0))
            for op in ops]
        puts = self.store.put_records(items)
        for op in ops:
            self.book.apply(op)
        return puts[-1].end_offset

    def forget(self, group: str, now: int) -> int:
        """Drop a share group's state (``duomq group delete``): the queues it
        had, forgotten by an op in the share log."""
        self.readers_seen.pop(group, None)
        queues = sum(1 for _k in self.book.of_group(group))
        if queues:
            self.write([{"op": "forget", "g": group, "t": "", "q": 0}], [], now)
        return queues

    # ------------------------------------------------------------ what it holds
    def figures(self) -> dict[str, tuple[int, int, int]]:
        return self.book.figures()

    def describe(self, resp, now: int) -> None:
        """A status answer's share groups, per queue they read."""
        for (group, topic, qid), q in sorted(self.book.queues.items()):
            since = min((h.since for h in q.held.values()), default=now)
            resp.share_queues.add(consumer_group=group, topic=topic, queue_id=qid,
                                  start_offset=q.start, next_offset=q.next, held=len(q.held),
                                  oldest_held_ms=max(0, now - since),
                                  redelivered=sum(h.count > 1 for h in q.held.values()))


def records_of(data: bytes):
    """(record, queue offset, tags) of each stored record in ``data``."""
    pos, end = 0, len(data)
    while pos < end:
        size, qoff = _SIZE_QOFF.unpack_from(data, pos)
        lt, lg = _TAGS.unpack_from(data, pos)
        t = pos + rec.HEADER_SIZE + lt
        yield data[pos:pos + size], qoff, data[t:t + lg].decode(errors="replace")
        pos += size
