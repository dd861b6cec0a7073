"""A message id never names two messages (issue 68): an ASYNC master acks
messages its slave never receives (iptables drops the replication link's
packets), dies, and the
slave, promoted, stores new messages at the same offsets. The ids the first
master gave answer MESSAGE_CUT naming both epochs, from the new master and,
after the old one rejoined and cut its log, from either member; the new
messages' ids answer them. Before, an id was the offset alone and answered
the new message."""

import subprocess
import sys

import pytest

from duomq.client import Message, Producer, PullConsumer, SendStatus
from duomq.common.errors import MessageCutError
from duomq.common.message import parse_msg_id_epoch
from duomq.testing.harness import master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="ASYNC_FLUSH", replication="ASYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=1000, allow_lagging_promotion=True,
            segment_size_bytes=1 << 20, max_message_bytes=64 << 10)


def cli_get(zk, cl, msg_id) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "duomq", "message", "get", msg_id,
                           "--zookeeper", zk, "--cluster", cl], capture_output=True, text=True,
                          timeout=60)


def test_an_id_the_failover_cut_says_so_and_never_answers_the_next_message(local_cluster,
                                                                          netfilter):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Ids", queues=1)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        kept = [p.send(Message("Ids", b"kept %d" % i)) for i in range(5)]
        with PullConsumer("probe", zookeeper=zk, cluster=cl, read_from="slave") as c:
            (mq,) = c.queues("Ids")
            wait_for(lambda: len(c.pull(mq, 0, 10).messages) == 5, what="the slave to hold them")
        netfilter.cut_port(old.ha_port)    # from now on the slave receives nothing
        cut = [p.send(Message("Ids", b"cut %d" % i)) for i in range(3)]
    assert all(r.status is SendStatus.SEND_OK for r in kept + cut), kept + cut
    old.kill()
    wait_for(lambda: master_id(zk, cl) == 1, timeout_s=30, what="the slave to take over")
    netfilter.heal()
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=15000) as p:
        after = [p.send(Message("Ids", b"next %d" % i)) for i in range(3)]
    assert all(r.status is SendStatus.SEND_OK for r in after), after
    _, first_next, epoch_next = parse_msg_id_epoch(after[0].msg_id)
    _, first_cut, epoch_cut = parse_msg_id_epoch(cut[0].msg_id)
    assert epoch_next > epoch_cut >= 1
    # the interleaving the test is about: new messages at the cut ones' offsets
    cut_offsets = {o for r in cut for o in r.physical_offsets}
    assert cut_offsets & {o for r in after for o in r.physical_offsets}, (cut, after)

    def check(where: str) -> None:
        with PullConsumer(f"audit-{where}", zookeeper=zk, cluster=cl) as c:
            for r in cut:
                with pytest.raises(MessageCutError, match=f"epoch {epoch_cut}.*cut"):
                    c.get_message(r.msg_id)
            for r in kept + after:
                assert c.get_message(r.msg_id).msg_id == r.msg_id
            (mq,) = c.queues("Ids")
            got = c.pull(mq, 0, 100).messages
            # what a consumer reads carries the ids the producer was given
            assert [m.body for m in got] == [b"kept %d" % i for i in range(5)] + \
                [b"next %d" % i for i in range(3)]
            assert [m.msg_id for m in got] == [r.msg_id for r in kept + after]
        shown = cli_get(zk, cl, cut[-1].msg_id)
        assert shown.returncode != 0 and "MESSAGE_CUT" in shown.stderr \
            and f"epoch {epoch_next}" in shown.stderr, shown.stdout + shown.stderr
        legacy = f"broker-a:{cut[0].physical_offsets[0]:016X}"      # the earlier form: unchecked
        assert cli_get(zk, cl, legacy).returncode == 0

    check("alone")                         # before the old master returns
    old.start()
    wait_for(lambda: local_cluster_roles(zk, cl) == {0: "SLAVE", 1: "MASTER"}, timeout_s=30,
             what="the old master to rejoin as a slave")
    check("rejoined")


def local_cluster_roles(zk, cl) -> dict[int, str]:
    from duomq.cli.status_cmd import collect
    return {b["id"]: b.get("role") for b in collect(zk, cl)["brokers"] if b["group"] == "broker-a"}


def test_a_retry_answered_by_the_next_master_gives_the_first_stores_id(local_cluster):
    """An idempotent send stored by the master of one epoch and retried on
    the next (its answer lost: here a second producer with the same producer
    id sends the same batch) is answered from the producer state: nothing
    stored again, the ids those of the first store (its epoch), the answer's
    epoch the answering master's (a drill's split-brain check reads it)."""
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    sync = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000)
    old = local_cluster.add_broker("broker-a", 0, **sync)
    local_cluster.add_broker("broker-a", 1, **sync)
    local_cluster.create_topic("Again", queues=1)
    with PullConsumer("where", zookeeper=zk, cluster=cl) as c:
        (mq,) = c.queues("Again")
    with Producer(zookeeper=zk, cluster=cl, producer_id=4242) as p:
        wait_for(lambda: p.send(Message("Again", b"warm"), queue=mq).ok, what="SYNC acks")
    with Producer(zookeeper=zk, cluster=cl, producer_id=777) as first:
        stored = first.send(Message("Again", b"once"), queue=mq)
    assert stored.ok and not stored.duplicate
    old.kill()
    wait_for(lambda: master_id(zk, cl) == 1, timeout_s=30, what="the slave to take over")
    with Producer(zookeeper=zk, cluster=cl, producer_id=777, send_timeout_ms=15000) as again:
        retried = again.send(Message("Again", b"once"), queue=mq)
    assert retried.duplicate and retried.epoch > stored.epoch
    assert retried.stored_epoch == stored.epoch and retried.msg_id == stored.msg_id
    assert retried.msg_ids == stored.msg_ids
    with PullConsumer("audit", zookeeper=zk, cluster=cl) as c:
        assert [m.body for m in c.pull(mq, 0, 10).messages].count(b"once") == 1
        assert c.get_message(retried.msg_id).body == b"once"
