"""run_cycle on synthetic views, as Patroni's test_ha.py: every transition
the drills exercise, each asserting the actions and the sentence logged."""

from dataclasses import replace

from duomq.common.role import Role
from duomq.controller.ha_cycle import (
    HALT_WAIT_S,
    LOST,
    NO_CUT,
    SUSPENDED,
    Claim,
    Drain,
    Follow,
    GroupView,
    Halt,
    Memory,
    PublishIsr,
    PublishRoutes,
    RefreshInfo,
    ReleaseMaster,
    StepDown,
    run_cycle,
)
from duomq.coordinator.nodes import EpochNode, IsrNode, MasterNode, MemberNode, SwitchoverNode

SETTLE = 0.3
FRESH = Memory()


def view(me=1, master=None, members=((0, 100), (1, 100)), isr=(0, 1), epochs=((1, 0, 0),),
         **kw):
    return GroupView(
        me=me, master=None if master is None else MasterNode(*master),
        members=tuple(MemberNode(*m) for m in members),
        isr=None if isr is None else IsrNode(1, 0, frozenset(isr)),
        epochs=tuple(EpochNode(*e) for e in epochs), **kw)


def settled(v, memory=FRESH, now=10.0):
    """Two cycles: the first sees the master gone and waits; the second decides."""
    first = run_cycle(v, memory, now, SETTLE)
    return run_cycle(v, first.memory, now + SETTLE, SETTLE)


MASTER, SLAVE = Role.MASTER, Role.SLAVE
MASTER_E1 = Memory(role=MASTER, epoch=1, isr_published=frozenset({0, 1}), routes_epoch=1)


# ------------------------------------------------------------ a slave's cycles
def test_a_slave_follows_the_master_of_a_new_epoch_cutting_its_log_where_the_epoch_began():
    v = view(me=1, master=(0, 2), epochs=((1, 0, 0), (2, 0, 700)), local_epoch=1,
             local_max_offset=900)
    c = run_cycle(v, Memory(), 0.0, SETTLE)
    assert c.actions == (Follow(2, 700),)
    assert c.sentence == ("following broker 0 at epoch 2 (local epoch 1, log cut at 700 if it "
                          "holds more)")
    assert c.memory.epoch == 2


def test_an_unreadable_master_node_is_neither_followed_nor_claimed():
    v = GroupView(me=1, master=MasterNode.unreadable(), members=(MemberNode(1, 100),))
    for memory in (Memory(), Memory(epoch=1), Memory(vacant_since=1.0)):
        c = run_cycle(v, memory, 10.0, SETTLE)
        assert c.actions == ()
        assert c.sentence == ("the master node cannot be read: waiting for its holder to "
                              "rewrite it or for its session to end")
        assert c.memory.vacant_since is None


def test_a_master_seeing_an_unreadable_node_not_its_own_steps_down():
    c = run_cycle(GroupView(me=0, master=MasterNode.unreadable()), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (StepDown("broker -1 holds the master node"),)


def test_a_slave_already_following_that_epoch_does_nothing():
    c = run_cycle(view(master=(0, 1)), Memory(epoch=1), 0.0, SETTLE)
    assert c.actions == ()
    assert c.sentence == "following broker 0 at epoch 1"


def test_a_returning_old_master_follows_its_successor_and_truncates_what_it_alone_wrote():
    # broker 0 led epoch 1 and wrote up to 1,500; broker 1 took over at 1,200 in epoch 2
    v = view(me=0, master=(1, 2), members=((0, 1500), (1, 1300)),
             epochs=((1, 0, 0), (2, 1, 1200)), local_epoch=1, local_max_offset=1500)
    c = run_cycle(v, Memory(), 0.0, SETTLE)
    assert c.actions == (Follow(2, 1200),)
    assert c.sentence == ("following broker 1 at epoch 2 (local epoch 1, log cut at 1200 if it "
                          "holds more)")


def test_a_broker_of_the_current_epoch_keeps_its_whole_log():
    v = view(me=1, master=(0, 2), epochs=((1, 0, 0), (2, 0, 700)), local_epoch=2,
             local_max_offset=650)
    c = run_cycle(v, Memory(), 0.0, SETTLE)
    assert c.actions == (Follow(2, NO_CUT),)
    assert c.sentence == "following broker 0 at epoch 2 (local epoch 2, nothing to cut)"


def test_the_cut_does_not_depend_on_the_log_end_the_cycle_read():
    """The serving thread compares the cut with its log's end when it cuts:
    the order is the same whatever end the cycle saw (bytes appended after
    the read, from any master, are judged by the epoch history alone)."""
    orders = {run_cycle(view(me=1, master=(0, 2), epochs=((1, 0, 0), (2, 0, 700)),
                             local_epoch=1, local_max_offset=end), Memory(), 0.0,
                        SETTLE).actions for end in (0, 650, 700, 900)}
    assert orders == {(Follow(2, 700),)}


def test_a_master_node_naming_this_slave_is_waited_out():
    c = run_cycle(view(me=1, master=(1, 3)), Memory(), 0.0, SETTLE)
    assert c.actions == ()
    assert c.sentence == ("the master node of epoch 3 names this broker, which is not master: "
                          "waiting for its lease to expire")


# ------------------------------------------------------------ the master's lease
def test_a_master_that_stopped_renewing_is_replaced_without_waiting_for_its_session():
    """Broker 0's node still exists (its session lives on) but went
    unrenewed for a lease: the slaves settle, then the best in-sync slave
    claims, deleting the node at the version it saw."""
    v = view(me=1, master=(0, 1), members=((0, 500), (1, 400), (2, 300)), isr=(0, 1, 2),
             master_expired=True, master_version=42, local_max_offset=400)
    first = run_cycle(v, Memory(epoch=1), 10.0, SETTLE)
    assert first.actions == (RefreshInfo(),)
    assert first.sentence == ("broker 0 (epoch 1) stopped renewing its lease: waiting 300 ms "
                              "for the members' offsets to settle")
    c = run_cycle(v, first.memory, 10.0 + SETTLE, SETTLE)
    # broker 0 holds the most but is gone: its member node is not a candidate
    assert c.actions == (Claim(2, 400, False, replaces=42, gone=0),)
    assert c.memory.role == MASTER


def test_a_candidate_stops_replicating_before_it_claims_so_its_epoch_starts_at_its_end():
    """The claimed start is the log's end: a link still applying the old
    master's stream would move it after the claim (bytes of the old epoch
    past the new epoch's start)."""
    v = view(me=1, master=(0, 1), members=((0, 500), (1, 400)), isr=(0, 1),
             master_expired=True, master_version=4, local_max_offset=400,
             serving_following=True)
    first = run_cycle(v, Memory(epoch=1), 10.0, SETTLE)
    c = run_cycle(v, first.memory, 10.0 + SETTLE, SETTLE)
    assert c.actions == (Halt(),) and c.wake_in_s == HALT_WAIT_S
    assert c.sentence.endswith("stopping replication before claiming")
    halted = replace(v, serving_following=False, local_max_offset=420)   # what arrived meanwhile
    c = run_cycle(halted, c.memory, 10.0 + SETTLE + 0.02, SETTLE)
    assert c.actions == (Claim(2, 420, False, replaces=4, gone=0),)


def test_a_live_master_is_followed_until_its_lease_expires():
    v = view(me=1, master=(0, 1), master_version=7)
    assert run_cycle(v, Memory(epoch=1), 10.0, SETTLE).actions == ()


def test_a_restarted_master_may_replace_its_own_expired_node():
    """A lone broker killed and restarted within its old session: its own
    node, no longer renewed, does not keep it from taking over again."""
    v = view(me=0, master=(0, 1), members=((0, 500),), isr=(0,), master_expired=True,
             master_version=3, local_max_offset=500, local_epoch=1)
    first = run_cycle(v, Memory(), 10.0, SETTLE)
    c = run_cycle(v, first.memory, 10.0 + SETTLE, SETTLE)
    assert c.actions == (Claim(2, 500, False, replaces=3),)


# ------------------------------------------------------------ master lost: the election
def test_master_lost_first_refreshes_offsets_and_waits_for_them_to_settle():
    c = run_cycle(view(), Memory(epoch=1), 5.0, SETTLE)
    assert c.actions == (RefreshInfo(),)
    assert c.sentence == "no master: waiting 300 ms for the members' offsets to settle"
    assert c.memory.vacant_since == 5.0 and c.memory.epoch == -1
    assert c.wake_in_s == SETTLE
    again = run_cycle(view(), c.memory, 5.1, SETTLE)
    assert again.actions == () and abs(again.wake_in_s - 0.2) < 1e-9


def test_master_lost_the_in_sync_slave_claims_the_next_epoch_at_its_log_end():
    v = view(me=1, members=((1, 800),), isr=(0, 1), epochs=((1, 0, 0),), local_max_offset=800)
    c = settled(v)
    assert c.actions == (Claim(2, 800, lagging=False),)
    assert c.sentence == "election: in-sync broker 1 at offset 800 takes over; claiming epoch 2"
    assert (c.memory.role, c.memory.epoch, c.memory.isr_published) == (MASTER, 2, frozenset({1}))


def test_master_lost_the_slave_with_less_data_leaves_it_to_the_other():
    v = view(me=1, members=((1, 800), (2, 900)), isr=(0, 1, 2), local_max_offset=800)
    c = settled(v)
    assert c.actions == ()
    assert c.sentence == "election: in-sync broker 2 at offset 900 takes over"
    assert c.memory.role == SLAVE


def test_a_lagging_slave_is_not_promoted_and_says_why():
    v = view(me=1, members=((1, 500),), isr=(0,), local_max_offset=500)
    c = settled(v)
    assert c.actions == ()
    assert c.sentence == ("election: no in-sync broker is alive (ISR [0], live [1]); "
                          "allow_lagging_promotion is off, so nobody is promoted and no "
                          "acknowledged message is lost")


def test_a_lagging_slave_is_promoted_when_allowed():
    v = view(me=1, members=((1, 500),), isr=(0,), local_max_offset=500,
             allow_lagging_promotion=True)
    c = settled(v)
    assert c.actions == (Claim(2, 500, lagging=True),)
    assert c.sentence == ("election: lagging broker (allow_lagging_promotion) 1 at offset 500 "
                          "takes over; claiming epoch 2")


def test_no_promotable_member_means_no_master():
    v = view(me=1, members=((1, 800, 1, SLAVE, False, False),), local_max_offset=800)
    c = settled(v)
    assert c.actions == ()
    assert c.sentence == "election: no live broker can take over"


def test_a_new_group_elects_broker_zero():
    v = view(me=0, members=((0, 0), (1, 0)), isr=None, epochs=())
    c = settled(v)
    assert c.actions == (Claim(1, 0),)
    assert c.sentence == "election: in-sync broker 0 at offset 0 takes over; claiming epoch 1"


def test_a_master_appearing_during_the_settle_wait_is_followed():
    first = run_cycle(view(), Memory(epoch=1), 5.0, SETTLE)
    c = run_cycle(view(master=(0, 2), epochs=((1, 0, 0), (2, 0, 100)), local_epoch=1,
                       local_max_offset=100), first.memory, 5.1, SETTLE)
    assert c.actions == (Follow(2, 100),)
    assert c.memory.vacant_since is None


# ------------------------------------------------------------ a master's cycles
def test_a_master_publishes_its_routes_once_the_serving_thread_took_the_role():
    mem = replace(MASTER_E1, routes_epoch=-1)
    before = run_cycle(view(me=0, master=(0, 1)), mem, 0.0, SETTLE)
    assert before.actions == () and before.memory.routes_epoch == -1
    c = run_cycle(view(me=0, master=(0, 1), serving_role=MASTER, serving_epoch=1), mem, 0.0,
                  SETTLE)
    assert c.actions == (PublishRoutes(1),)
    assert c.sentence == "master of epoch 1, in-sync set [0, 1]"
    assert run_cycle(view(me=0, master=(0, 1), serving_role=MASTER, serving_epoch=1), c.memory,
                     0.0, SETTLE).actions == ()


def test_a_master_publishes_the_in_sync_set_its_links_find_with_itself():
    c = run_cycle(view(me=0, master=(0, 1), isr_wanted=frozenset({2})), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (PublishIsr(frozenset({0, 2})),)
    assert c.sentence == "master of epoch 1, in-sync set [0, 2]"
    c = run_cycle(view(me=0, master=(0, 1), isr_wanted=frozenset()), c.memory, 0.0, SETTLE)
    assert c.actions == (PublishIsr(frozenset({0})),)


def test_a_master_whose_node_is_gone_steps_down():
    c = run_cycle(view(me=0), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (StepDown("the master node is gone"),)
    assert c.sentence == "lost the master node (the master node is gone): stepping down"
    assert (c.memory.role, c.memory.epoch, c.memory.routes_epoch) == (SLAVE, -1, -1)


def test_a_master_whose_node_another_broker_holds_steps_down():
    c = run_cycle(view(me=0, master=(1, 2)), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (StepDown("broker 1 holds the master node"),)
    assert c.sentence == "lost the master node (broker 1 holds the master node): stepping down"


def test_a_master_node_of_another_epoch_is_not_ours():
    c = run_cycle(view(me=0, master=(0, 3)), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (StepDown("broker 0 holds the master node"),)


# ------------------------------------------------------------ lease and session
def test_a_suspended_session_keeps_the_role_and_says_writes_wait_for_the_lease():
    c = run_cycle(GroupView(me=0, session=SUSPENDED), MASTER_E1, 0.0, SETTLE)
    assert c.actions == ()
    assert c.sentence == ("ZooKeeper connection suspended: acking only what every in-sync "
                          "slave holds until the lease is renewed")
    assert c.memory == MASTER_E1


def test_a_lost_session_steps_the_master_down():
    c = run_cycle(GroupView(me=0, session=LOST), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (StepDown("ZooKeeper session lost"),)
    assert c.sentence == "ZooKeeper session lost: stepping down"
    assert c.memory.role == SLAVE


def test_a_slave_without_zookeeper_waits():
    c = run_cycle(GroupView(me=1, session=LOST), Memory(epoch=1), 0.0, SETTLE)
    assert c.actions == () and c.sentence == "ZooKeeper session lost: waiting to reconnect"
    assert c.memory == Memory(epoch=1)


# ------------------------------------------------------------ switchover
def test_a_switchover_drains_the_master():
    v = view(me=0, master=(0, 1), switchover=SwitchoverNode(0, 1))
    c = run_cycle(v, MASTER_E1, 0.0, SETTLE)
    assert c.actions == (Drain(),)
    assert c.sentence == "draining writes for a planned switchover to broker 1"
    c = run_cycle(replace(v, switchover=SwitchoverNode()), MASTER_E1, 0.0, SETTLE)
    assert c.sentence == "draining writes for a planned switchover to the best in-sync slave"


def test_a_withdrawn_switchover_ends_the_drain():
    """A switchover that timed out (its node deleted) must not leave the
    master refusing writes for ever."""
    c = run_cycle(view(me=0, master=(0, 1), draining=True), MASTER_E1, 0.0, SETTLE)
    assert c.actions == (Drain(on=False),)
    assert c.sentence == "the planned switchover was withdrawn: taking writes again"
    c = run_cycle(view(me=0, master=(0, 1)), MASTER_E1, 0.0, SETTLE)
    assert Drain(on=False) not in c.actions


def test_a_switchover_from_another_master_is_not_ours():
    c = run_cycle(view(me=0, master=(0, 1), switchover=SwitchoverNode(5)), MASTER_E1, 0.0,
                  SETTLE)
    assert c.actions == ()


def test_a_drained_master_releases_the_master_node():
    v = view(me=0, master=(0, 1), switchover=SwitchoverNode(0), drained=True)
    c = run_cycle(v, MASTER_E1, 0.0, SETTLE)
    assert c.actions == (ReleaseMaster(),)
    assert c.sentence == "handed over the master of epoch 1: releasing the master node"
    assert (c.memory.role, c.memory.epoch) == (SLAVE, -1)


def test_after_a_handover_the_old_master_stepping_down_is_not_elected_and_the_target_is():
    members = ((0, 900, 1, SLAVE, True), (1, 900), (2, 900))
    sw = SwitchoverNode(0, 2)
    old = settled(view(me=0, members=members, isr=(0, 1, 2), switchover=sw, local_max_offset=900))
    assert old.actions == ()
    assert old.sentence == "election: in-sync broker 2 at offset 900 takes over"
    target = settled(view(me=2, members=members, isr=(0, 1, 2), switchover=sw,
                          local_max_offset=900))
    assert target.actions == (Claim(2, 900),)
