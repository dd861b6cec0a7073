"""The share groups' long polling (share/pop_hold.py), beside the pull's:
POPs held in order, counted by owner (a user's quota of held pops),
forgotten by connection, and kept only as a look leaves them."""

from duomq.proto import pb
from duomq.share.pop_hold import HeldPop, PopHoldService


def pop(identity: bytes, rid: int, owner: str) -> HeldPop:
    return HeldPop(identity, rid, pb.PopRequest(consumer_group="g", topic="T"), 1.0, owner)


def test_pops_are_held_in_order_counted_by_owner_and_forgotten_by_connection():
    hold = PopHoldService()
    assert not hold.held and len(hold) == 0
    a, b, c = pop(b"c1", 1, "alice/w1"), pop(b"c2", 2, "bob/w1"), pop(b"c1", 3, "alice/w2")
    for p in (a, b, c):
        hold.hold(p)
    assert hold.held and [p.request_id for p in hold] == [1, 2, 3]
    assert (hold.held_by("alice/"), hold.held_by("bob/"), hold.held_by("carol/")) == (2, 1, 0)
    assert hold.forget(b"c1") == 2 and [p.request_id for p in hold] == [2]
    assert hold.forget(b"c1") == 0


def test_a_look_keeps_only_what_it_did_not_answer():
    hold = PopHoldService()
    pops = [pop(b"c", i, "u/x") for i in range(4)]
    for p in pops:
        hold.hold(p)
    seen = list(hold)
    hold.keep_only([p for p in seen if p.request_id % 2])
    assert [p.request_id for p in hold] == [1, 3]
