"""The SYNC ack rule: sync_replicas, min_sync_replicas and the published
in-sync set (replication/protocol.py)."""

import pytest

from duomq.replication.protocol import ack_point, required_acks


@pytest.mark.parametrize("in_sync,sync,min_sync,need", [
    (2, 2, 2, 2), (3, 2, 2, 2),       # enough slaves: sync_replicas of them
    (1, 2, 2, None),                  # the default (min = sync): too few is SLAVE_NOT_AVAILABLE
    (1, 2, 1, 1), (0, 2, 1, None),    # degraded down to min_sync_replicas, every one of them
    (0, 1, 0, 0), (0, 2, 0, 0),       # min 0: a lone master acks alone
])
def test_required_acks(in_sync, sync, min_sync, need):
    assert required_acks(in_sync, sync, min_sync) == need


def test_full_group_acks_at_the_sync_replicas_th_highest():
    assert ack_point([900, 500, 300], [900, 500, 300], 1000, 2, 2) == 500
    assert ack_point([900, 500, 300], [900, 500, 300], 1000, 1, 0) == 900


def test_degraded_group_waits_for_every_slave_zookeeper_still_lists():
    # two slaves wanted, one in sync at 800; the other (dropped out at 300) is
    # still in the published set: nothing past 300 is acked until it is removed
    assert ack_point([800], [800, 300], 1000, 2, 1) == 300
    assert ack_point([800], [800], 1000, 2, 1) == 800          # after the ISR shrank


def test_lone_master_with_min_zero_acks_its_whole_log_once_alone_in_the_isr():
    assert ack_point([], [450], 1000, 1, 0) == 450             # the slave is still listed
    assert ack_point([], [], 1000, 1, 0) == 1000               # ISR = {master}
    assert ack_point([], [], 1000, 1, 1) is None               # the default refuses
