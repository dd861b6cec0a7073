"""Broadcast consumption against real brokers: every member of the group gets
every message, each keeps its offsets in its own file and resumes from it."""

import threading

import pytest

from duomq.client import Message, Producer, PushConsumer
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


class Recorder(list):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def __call__(self, msg):
        with self.lock:
            self.append(msg.body)


def test_every_member_gets_every_message_and_resumes_from_its_file(local_cluster, tmp_path):
    local_cluster.add_broker("broker-a")
    local_cluster.add_broker("broker-b")
    local_cluster.create_topic("Config", queues=2)       # 4 queues over two groups
    zk, cl = local_cluster.zookeeper, local_cluster.cluster

    def member(name, recorder):
        return PushConsumer("caches", topic="Config", on_message=recorder, zookeeper=zk, cluster=cl,
                            message_model="broadcasting", consume_from="first",
                            offset_store_dir=str(tmp_path / "offsets"), instance_name=name,
                            offset_commit_interval_ms=200).start()

    r1, r2 = Recorder(), Recorder()
    m1, m2 = member("host-1", r1), member("host-2", r2)
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Config", b"v%d" % i) for i in range(100)])
        wait_for(lambda: len(r1) == 100 and len(r2) == 100, what="both members to get all 100")
        assert sorted(r1) == sorted(r2) == sorted(b"v%d" % i for i in range(100))
        assert len(m1.held()) == len(m2.held()) == 4
        m2.shutdown()                                    # commits to host-2.json
        p.send_batch([Message("Config", b"w%d" % i) for i in range(50)])
        wait_for(lambda: len(r1) == 150, what="the remaining member to get the next 50")
        r2b = Recorder()
        m2 = member("host-2", r2b)                       # back: resumes from its own file
        wait_for(lambda: len(r2b) == 50, what="host-2 to catch up on what it missed")
    m1.shutdown()
    m2.shutdown()
    assert sorted(r2b) == sorted(b"w%d" % i for i in range(50)), "resumed, not restarted"
    assert (tmp_path / "offsets" / cl / "caches" / "host-1.json").exists()
