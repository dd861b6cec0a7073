"""Drills 1 and 2: kill -9 the master under continuous sends with SYNC
double-write + SYNC_FLUSH; the slave takes over with no acked message lost;
the old master returns as a slave, truncates its unreplicated tail, and the
group's logs end identical."""

import filecmp
import os
import time

import pytest

from duomq.drill.load import Workload
from duomq.testing.drill_reports import audit
from duomq.testing.harness import master_id, master_info, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYNC_PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
                 slave_timeout_ms=1000, sync_flush_timeout_ms=1000, segment_size_bytes=1 << 20,
                 max_message_bytes=64 << 10, max_pull_bytes=1 << 20)


def commitlog_files(broker):
    d = os.path.join(broker.data_dir, "store", "commitlog")
    return d, sorted(os.listdir(d))


def test_kill9_master_under_sync_load_then_old_master_rejoins(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **SYNC_PAIR)
    new = local_cluster.add_broker("broker-a", 1, **SYNC_PAIR)
    local_cluster.create_topic("Drill", queues=4)
    load = Workload(zk, cl, "Drill", producers=2, consumers=0, send_timeout_ms=4000).start()
    try:
        wait_for(lambda: load.acked() >= 300, what="acked load before the fault")
        fault_at = time.monotonic()
        old.kill()                                        # kill -9 the master
        wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
        # SYNC with the only slave gone: stored, answered SLAVE_NOT_AVAILABLE, never SEND_OK
        wait_for(lambda: load.first_stored_after(fault_at), what="writes after the failover")
        assert load.first_ack_after(fault_at) is None
        # drill 2: the old master returns as a slave of epoch 2 and SYNC acks resume
        old.start()
        wait_for(lambda: load.first_ack_after(time.monotonic() - 0.5), what="SEND_OK again")
        time.sleep(0.5)
    finally:
        load.stop()
    report = audit("failover_sync_kill9", load, fault_at,
                   new_master_epoch=master_info(zk, cl).epoch)
    assert report.lost == 0 and report.unexpected == 0 and report.guarantees_held
    assert report.acked >= 300 and report.stored_not_durable > 0
    assert report.notes["stored_after_s"] is not None and report.notes["stored_after_s"] < 15
    assert report.notes["new_master_epoch"] == 2

    def identical():
        (d_old, names_old), (d_new, names_new) = commitlog_files(old), commitlog_files(new)
        return names_old == names_new and all(
            filecmp.cmp(os.path.join(d_old, n), os.path.join(d_new, n), shallow=False)
            for n in names_new)
    wait_for(identical, what="byte-identical logs")
    assert "following broker 1 at epoch 2" in old.log_tail(10_000)
