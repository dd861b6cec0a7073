"""A master makes each consumer group's retry and dead-letter topics
(master/group_topics.py) against a real ZooKeeper: a group whose topics
ZooKeeper refused for a while is tried again by the thread itself, not left
for a heartbeat that a consumer heard once may never send."""

import time

from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from duomq.coordinator.paths import ZkPaths
from duomq.master.group_topics import GroupTopics
from duomq.testing.harness import wait_for

CLUSTER = "TestCluster"


# nobody may create a topic (read, and the right to open the node again)
CLOSED = [make_acl("world", "anyone", read=True, admin=True)]


def started_while_closed(zk) -> tuple[ZkPaths, GroupTopics]:
    """The topics node closed to creation, and a master's group-topics thread."""
    paths = ZkPaths(CLUSTER)
    zk.ensure_path(paths.topics)
    zk.set_acls(paths.topics, CLOSED)
    made = GroupTopics(zk, CLUSTER, "broker-a")
    made.start()
    return paths, made


def test_a_group_whose_topics_were_refused_is_tried_again_without_another_heartbeat(zk):
    paths, made = started_while_closed(zk)
    try:
        made.heard(["refused-once"])
        time.sleep(1.0)                  # the first try and its first retry were refused
        assert not zk.exists(paths.topic("%RETRY%refused-once"))
        assert "refused-once" in made.known   # not heard again: a heartbeat does not queue it twice
        zk.set_acls(paths.topics, OPEN_ACL_UNSAFE)
        wait_for(lambda: zk.exists(paths.topic("%RETRY%refused-once")) and
                 zk.exists(paths.topic("%DLQ%refused-once")), 10,
                 "the master's thread to make the group's topics once ZooKeeper lets it")
        made.heard(["another"])          # the thread goes on serving new groups
        wait_for(lambda: zk.exists(paths.topic("%DLQ%another")), 10, "another group's topics")
    finally:
        made.shutdown()


def test_groups_refused_together_are_all_made_and_a_stop_does_not_wait_out_a_retry(zk):
    """Several groups refused at once each keep their own retries (none
    waits behind another's backoff), and a master stopping (demoted) ends
    the thread at once with retries still due, not after them."""
    paths, made = started_while_closed(zk)
    try:
        made.heard(["first", "second"])
        time.sleep(2.0)                  # three refusals each: backoffs of 2 s next
        made.heard(["third"])            # refused as it arrives, then due after 0.5 s
        time.sleep(0.2)
        zk.set_acls(paths.topics, OPEN_ACL_UNSAFE)
        wait_for(lambda: all(zk.exists(paths.topic(p + g)) for g in ("first", "second", "third")
                             for p in ("%RETRY%", "%DLQ%")), 10,
                 "every refused group's topics once ZooKeeper lets them be made")
        zk.set_acls(paths.topics, CLOSED)
        made.heard(["late"])
        time.sleep(0.7)                  # refused twice: its next try is a second away
    finally:
        t0 = time.monotonic()
        made.shutdown()
        zk.set_acls(paths.topics, OPEN_ACL_UNSAFE)
    assert time.monotonic() - t0 < 0.5 and not made._thread.is_alive()
    assert not zk.exists(paths.topic("%RETRY%late"))
