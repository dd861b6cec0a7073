from duomq.controller.election import (
    Member,
    Snapshot,
    choose_master,
    cut_from,
    truncation_point,
)


def snap(members, isr=None, master=None, lagging=False, preferred=None):
    return Snapshot(tuple(Member(*m) for m in members), None if isr is None else frozenset(isr),
                    master, lagging, preferred)


def test_nobody_while_a_master_holds_the_node():
    assert choose_master(snap([(1, 100)], {0, 1}, master=0)).candidate is None


def test_in_sync_slave_with_most_data_wins_then_lowest_id():
    assert choose_master(snap([(1, 100), (2, 300)], {0, 1, 2})).candidate == 2
    assert choose_master(snap([(2, 300), (1, 300)], {0, 1, 2})).candidate == 1


def test_out_of_sync_slave_is_not_promoted_unless_allowed():
    d = choose_master(snap([(1, 100)], {0}))
    assert d.candidate is None and "allow_lagging_promotion" in d.reason
    d = choose_master(snap([(1, 100)], {0}, lagging=True))
    assert d.candidate == 1 and d.lagging


def test_new_group_elects_broker_zero_at_offset_zero():
    assert choose_master(snap([(1, 0), (0, 0)])).candidate == 0


def test_stepping_down_master_is_excluded_and_target_preferred():
    s = Snapshot((Member(0, 500, stepping_down=True), Member(1, 500), Member(2, 500)),
                 frozenset({0, 1, 2}), None, preferred=2)
    assert choose_master(s).candidate == 2


def test_truncation_point():
    history = [(1, 0), (2, 1000), (3, 5000)]
    assert truncation_point(1, 1500, history) == 1000   # old epoch-1 master: cut its tail
    assert truncation_point(2, 4000, history) == 4000   # behind the epoch-3 start: keep all
    assert truncation_point(2, 7000, history) == 5000
    assert truncation_point(3, 7000, history) == 7000   # current epoch: nothing to cut
    # a lagging promotion started epoch 3 below epoch 2's start: an epoch-1
    # broker keeps nothing past it (bytes 900..1000 are epoch 3's now)
    lagging = [(1, 0), (2, 1000), (3, 900)]
    assert truncation_point(1, 1500, lagging) == 900
    assert truncation_point(2, 1500, lagging) == 900



def test_a_silent_member_is_no_candidate_unless_it_may_hold_more():
    """A dead slave's member node outlives it until its session ends: it is
    no candidate once silent. But one that last said it held more than any
    live candidate may be alive and hold acked writes: waited for."""
    silent_behind = (Member(1, 100, silent=True), Member(2, 100))
    assert choose_master(Snapshot(silent_behind, frozenset({0, 1, 2}), None)).candidate == 2
    silent_ahead = (Member(1, 300, silent=True), Member(2, 100))
    d = choose_master(Snapshot(silent_ahead, frozenset({0, 1, 2}), None))
    assert d.candidate is None and "broker 1 is silent but last held offset 300" in d.reason
    # outside the in-sync set, its offset does not hold anyone back
    d = choose_master(Snapshot(silent_ahead, frozenset({0, 2}), None))
    assert d.candidate == 2


def test_a_candidate_that_cannot_vouch_for_its_masters_writes_waits_for_every_silent_member():
    """A silent member's node may be a second old: the same offset as the
    best live one, or less, and it may still hold acked writes the other
    lacks (it acked them alone while the other was down). A live candidate
    that held all its master had when it last heard it goes ahead; one whose
    link never heard the master (restarted after it died) waits."""
    for stale in (100, 80):
        vouching = (Member(1, stale, silent=True), Member(2, 100, caught_up=True))
        assert choose_master(Snapshot(vouching, frozenset({0, 1, 2}), None)).candidate == 2
        restarted = (Member(1, stale, silent=True), Member(2, 100, caught_up=False))
        d = choose_master(Snapshot(restarted, frozenset({0, 1, 2}), None))
        assert d.candidate is None and "broker 1 is silent" in d.reason
        d = choose_master(Snapshot(restarted, frozenset({0, 2}), None))   # not in sync: no wait
        assert d.candidate == 2


def test_silence_counts_only_while_zookeeper_answers():
    from duomq.controller.master_lease import MasterSilence
    s = MasterSilence(1.8, 0.3)
    assert s.unchanged_for(0.0, 5.0) == 0.0          # no prompt answer yet
    s.probed(None, 0.0, 0.01)
    assert s.unchanged_for(0.5, 2.5) == 2.0
    s.failed(3.0)                                     # ZooKeeper slow: counted from here
    assert s.unchanged_for(0.5, 4.0) == 1.0


def test_cut_from_is_where_a_later_epoch_took_over_the_log():
    """What the master of an epoch wrote is cut from the lowest start of a
    later epoch (a lagging promotion may start below an earlier start);
    nothing is cut of the newest epoch."""
    history = [(1, 0), (2, 100), (3, 80), (4, 300)]
    assert cut_from(1, history) == 80
    assert cut_from(2, history) == 80       # epoch 3 began below epoch 2's start
    assert cut_from(3, history) == 300
    assert cut_from(4, history) is None
    assert cut_from(9, []) is None
