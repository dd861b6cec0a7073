"""The share book (pure): windows, receipts, replays from any point."""

import random

import pytest

from duomq.share.book import ReceiptError, ShareBook, decode_op, encode_op

K = ("g", "T", 0)


def pop(items, s, p, n, d, q=0):
    return {"op": "pop", "g": "g", "t": "T", "q": q, "s": s, "p": p, "n": n, "i": items, "d": d}


def op(kind, offsets, d=None, q=0):
    out = {"op": kind, "g": "g", "t": "T", "q": q, "o": offsets}
    if d is not None:
        out["d"] = d
    return out


def test_the_window_moves_only_past_done_offsets():
    b = ShareBook()
    b.apply(pop([[0, 1], [1, 1], [3, 1]], 0, 0, 4, 1000))     # 2 was skipped (filtered)
    q = b.queue(K)
    assert (q.start, q.next, sorted(q.held), q.done) == (0, 4, [0, 1, 3], {2})
    b.apply(op("ack", [1]))
    assert q.start == 0                      # 0 still held
    b.apply(op("ack", [0]))
    assert (q.start, q.done) == (3, set())   # past 0, 1 and the skipped 2
    b.apply(op("dead", [3]))
    assert (q.start, q.next, q.held) == (4, 4, {})
    assert b.dead == {"g": 1}


def test_receipts_hold_only_their_delivery_until_its_deadline():
    b = ShareBook()
    b.apply(pop([[5, 1]], 5, 5, 6, 1000))
    assert b.check(K, 5, 1, 999).count == 1
    with pytest.raises(ReceiptError, match="invisible time ended"):
        b.check(K, 5, 1, 1000)
    with pytest.raises(ReceiptError, match="delivery 1; this receipt is of delivery 2"):
        b.check(K, 5, 2, 10)
    assert b.queue(K).due(1000, 10)[0][0] == 5
    b.apply(pop([[5, 2]], 5, 6, 6, 3000))              # delivered again
    assert b.redeliveries == {"g": 1}
    with pytest.raises(ReceiptError, match="delivery 2; this receipt is of delivery 1"):
        b.check(K, 5, 1, 1500)
    b.apply(op("renew", [5], 5000))
    assert b.check(K, 5, 2, 4000).until == 5000
    b.apply(op("release", [5], 4500))
    with pytest.raises(ReceiptError, match="released"):
        b.check(K, 5, 2, 4000)
    assert b.queue(K).due(4499, 10) == [] and b.queue(K).due(4500, 10)[0][0] == 5
    b.apply(op("ack", [5]))
    with pytest.raises(ReceiptError, match="acked already"):
        b.check(K, 5, 2, 4000)
    with pytest.raises(ReceiptError, match="never delivered"):
        b.check(K, 9, 1, 4000)
    with pytest.raises(ReceiptError, match="never delivered"):
        b.check(("other", "T", 0), 5, 2, 4000)


def test_ops_about_unknown_queues_change_nothing_and_unknown_kinds_are_refused():
    b = ShareBook()
    b.apply(op("ack", [1]))
    b.apply(op("renew", [1], 5))
    assert b.queues == {}
    b.apply(pop([], 0, 0, 0, 1))
    with pytest.raises(ValueError, match="unknown share op"):
        b.apply({"op": "burn", "g": "g", "t": "T", "q": 0})
    with pytest.raises(ValueError):
        decode_op(b"[1, 2]")
    assert decode_op(encode_op(op("ack", [3]))) == op("ack", [3])


def random_history(seed: int, n: int = 400) -> list[dict]:
    """What a master would write: pops of new and due offsets, acks,
    releases and renewals of held ones, on two queues."""
    rnd = random.Random(seed)
    b, out, now = ShareBook(), [], 0
    for _ in range(n):
        now += rnd.randrange(0, 50)
        qid = rnd.randrange(2)
        key = ("g", "T", qid)
        q = b.queue(key)
        kind = rnd.choice(["pop", "pop", "ack", "release", "renew", "dead"])
        if kind == "pop" or q is None:
            start = q.start if q else 0
            nxt = q.next if q else 0
            items = [[o, h.count + 1] for o, h in (q.due(now, 3) if q else [])]
            new = rnd.randrange(0, 5)
            items += [[o, 1] for o in range(nxt, nxt + new) if rnd.random() < 0.8]
            one = pop(items, start, nxt, nxt + new, now + rnd.randrange(10, 200), qid)
        else:
            held = [o for o, h in q.held.items() if h.inflight and h.until > now]
            if not held:
                continue
            pick = rnd.sample(held, rnd.randrange(1, len(held) + 1))
            one = op(kind, pick, now + rnd.randrange(0, 100) if kind in ("release", "renew")
                     else None, qid)
        b.apply(one)
        out.append(one)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_a_replay_gives_the_same_book_and_a_late_replay_loses_nothing(seed):
    ops = random_history(seed)
    whole = ShareBook()
    for o in ops:
        whole.apply(decode_op(encode_op(o)))
    again = ShareBook()
    for o in ops:
        again.apply(o)
    assert snapshot(whole) == snapshot(again)
    for q in whole.queues.values():          # the invariant: the window is held or done
        assert set(range(q.start, q.next)) == set(q.held) | q.done
        assert not set(q.held) & q.done
        assert all(o >= q.start for o in q.done)
    # a replay that begins late (retention took the first ops): every
    # offset the whole book holds or has not handed out is still held or
    # ahead, so nothing is lost (some is delivered again)
    cut = len(ops) // 2
    late = ShareBook()
    for o in ops[cut:]:
        late.apply(o)
    for key, q in whole.queues.items():
        lq = late.queue(key)
        if lq is None:
            continue                          # never popped after the cut
        assert lq.next == q.next
        for offset in q.held:
            assert offset in lq.held or offset >= lq.next, (key, offset)


def snapshot(b: ShareBook):
    return {k: (q.start, q.next, {o: (h.count, h.until, h.inflight) for o, h in q.held.items()},
                frozenset(q.done)) for k, q in b.queues.items()}


def test_a_deleted_group_is_forgotten_and_starts_afresh():
    b = ShareBook()
    b.apply(pop([[0, 1]], 0, 0, 1, 100))
    b.apply(pop([[0, 1]], 0, 0, 1, 100, q=1))
    other = {"op": "pop", "g": "h", "t": "T", "q": 0, "s": 0, "p": 0, "n": 1, "i": [[0, 1]],
             "d": 100}
    b.apply(other)
    b.apply({"op": "forget", "g": "g", "t": "", "q": 0})
    assert list(b.queues) == [("h", "T", 0)]
    b.apply(pop([], 7, 7, 7, 100))                  # a new first pop: its own start
    assert (b.queue(K).start, b.queue(K).held) == (7, {})


def test_when_held_messages_may_be_due_is_known_without_a_scan():
    b = ShareBook()
    gt = ("g", "T")
    assert not b.due_by(gt, 10**12)                 # nothing held: never
    b.apply(pop([[0, 1], [1, 1]], 0, 0, 2, 1000))
    assert not b.due_by(gt, 999) and b.due_by(gt, 1000)
    b.apply(op("ack", [0, 1]))
    assert b.due_by(gt, 1000)                        # a lower bound: acks do not raise it
    b.settle_due(gt)
    assert not b.due_by(gt, 10**12)                  # exact again: nothing held
    b.apply(pop([[2, 1]], 2, 2, 3, 5000))
    b.apply(op("release", [2], 1500))
    assert b.due_by(gt, 1500) and not b.due_by(gt, 1499)
    b.apply(op("renew", [2], 9000))
    b.settle_due(gt)
    assert not b.due_by(gt, 8999) and b.due_by(gt, 9000)
    late = ShareBook()                               # a replay that began late: due at once
    late.apply(pop([[7, 1]], 5, 7, 8, 5000))
    assert late.due_by(gt, 0)


def test_a_receipt_holds_only_in_the_hands_that_popped_it():
    """Another consumer of the group (another client id, or another user
    with the same client id) and a guessed receipt (the right queue, offset
    and delivery, no key or a wrong one) hold nothing; the owner with the
    pop's key does. A pop of an earlier release (no owner recorded) takes
    any receipt."""
    b = ShareBook()
    b.apply({**pop([[5, 1], [6, 1]], 5, 5, 7, 1000), "c": "alice/c1", "k": 0xABCDEF})
    assert b.check(K, 5, 1, 10, "alice/c1", 0xABCDEF).owner == "alice/c1"
    for who, key in (("alice/c2", 0xABCDEF), ("bob/c1", 0xABCDEF), ("alice/c1", 0),
                     ("alice/c1", 0xABCDEE), ("", 0)):
        with pytest.raises(ReceiptError, match="held by another consumer"):
            b.check(K, 5, 1, 10, who, key)
    # what a replay rebuilds holds the same owner and key (a new master checks the same)
    again = ShareBook()
    again.apply(decode_op(encode_op({**pop([[5, 1]], 5, 5, 6, 1000), "c": "alice/c1",
                                     "k": 7})))
    with pytest.raises(ReceiptError, match="held by another consumer"):
        again.check(K, 5, 1, 10, "mallory/c1", 7)
    assert again.check(K, 5, 1, 10, "alice/c1", 7)
    # a redelivery is the new popper's alone
    b.apply({**pop([[5, 2]], 5, 7, 7, 3000), "c": "bob/c9", "k": 42})
    with pytest.raises(ReceiptError, match="held by another consumer"):
        b.check(K, 5, 2, 2000, "alice/c1", 0xABCDEF)
    assert b.check(K, 5, 2, 2000, "bob/c9", 42)
    old = ShareBook()
    old.apply(pop([[1, 1]], 1, 1, 2, 1000))
    assert old.check(K, 1, 1, 10, "anyone/x", 0)
    # a client of an earlier release (no client id, no key): its user's alone
    legacy = ShareBook()
    legacy.apply({**pop([[2, 1]], 2, 2, 3, 1000), "c": "alice/", "k": 0})
    assert legacy.check(K, 2, 1, 10, "alice/", 0)
    with pytest.raises(ReceiptError, match="held by another consumer"):
        legacy.check(K, 2, 1, 10, "mallory/", 0)
