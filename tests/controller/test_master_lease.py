"""The slaves' count of a master's silence (controller/master_lease.py)."""

from duomq.controller.master_lease import MasterSilence, master_ack_lease_s, renew_period_s

LEASE, PROMPT = 1.8, 0.3


def test_a_node_unchanged_for_a_lease_of_prompt_reads_expires():
    s = MasterSilence(LEASE, PROMPT)
    s.probed((5, 1), 0.0, 0.01)
    t = 0.01
    while t < 1.8:
        t += 0.3
        s.probed((5, 1), t, t + 0.01)
    assert not s.expired((5, 1), 1.80)
    assert s.expired((5, 1), 1.81)
    assert s.remaining_s(1.0) == LEASE + 0.01 - 1.0


def test_a_renewal_restarts_the_count_from_the_read_that_showed_it():
    s = MasterSilence(LEASE, PROMPT)
    s.probed((5, 1), 0.0, 0.01)
    s.probed((5, 2), 1.5, 1.52)
    assert not s.expired((5, 2), 3.0) and s.expired((5, 2), 3.33)


def test_a_recreated_node_counts_as_new():
    s = MasterSilence(LEASE, PROMPT)
    s.probed((5, 9), 0.0, 0.01)
    s.probed((8, 0), 1.0, 1.01)           # another czxid, version 0 again
    assert not s.expired((8, 0), 2.0)


def test_while_zookeeper_is_away_or_slow_nobody_is_presumed_dead():
    """ZooKeeper paused 10 s: every read fails or comes back late; once it
    answers again the master gets a whole lease to renew."""
    s = MasterSilence(LEASE, PROMPT)
    s.probed((5, 1), 0.0, 0.01)
    for t in (0.31, 0.61, 10.0):
        s.failed(t)
    s.probed((5, 1), 10.0, 10.2 + 0.2)    # answered, but after 0.4 s: not prompt
    assert not s.expired((5, 1), 11.9)
    s.probed((5, 1), 12.0, 12.01)
    assert s.expired((5, 1), 12.21)        # 10.4 + 1.8 = 12.2


def test_the_cycle_must_have_read_the_node_that_was_counted():
    s = MasterSilence(LEASE, PROMPT)
    s.probed((5, 1), 0.0, 0.01)
    assert not s.expired((5, 2), 5.0)      # the cycle saw a renewal the probe has not
    assert not s.expired(None, 5.0)


def test_the_master_acks_for_half_the_lease_and_renews_six_times_per_lease():
    assert master_ack_lease_s(LEASE) == 0.9 and abs(renew_period_s(LEASE) - 0.3) < 1e-12
