from duomq.master.queue_locks import QueueLocks

Q = [("T", 0), ("T", 1)]


def test_one_holder_per_queue_until_it_unlocks_or_expires():
    locks = QueueLocks(ttl_s=60)
    assert locks.lock("g", "c1", Q, now=0) == Q
    assert locks.lock("g", "c2", Q + [("T", 2)], now=1) == [("T", 2)]
    assert locks.lock("g", "c1", Q, now=30) == Q            # renewed
    assert locks.lock("g", "c2", Q, now=80) == []           # 30 + 60 not reached
    locks.unlock("g", "c2", [("T", 0)])                      # not c2's: no effect
    assert locks.holder("g", "T", 0, now=80) == "c1"
    locks.unlock("g", "c1", [("T", 0)])
    assert locks.lock("g", "c2", Q, now=81) == [("T", 0)]
    assert locks.lock("g", "c2", Q, now=91) == Q             # c1's lock of T/1 expired at 90


def test_groups_lock_independently_and_a_role_change_clears():
    locks = QueueLocks()
    assert locks.lock("g1", "c1", Q, now=0) == Q
    assert locks.lock("g2", "c2", Q, now=0) == Q
    locks.clear()
    assert locks.holder("g1", "T", 0, now=1) is None
