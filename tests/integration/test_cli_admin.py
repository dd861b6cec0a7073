"""The admin commands as a user types them against a running broker:
consumer groups listed, described and reset every way, a topic described
with its queues' offsets, typos refused, an unreachable ZooKeeper in one
line, and produce printing an id per message."""

import json
import time

import pytest

from duomq.cli.group_cmd import plan_reset
from duomq.client import Message, Producer
from duomq.testing.harness import run_cli

pytestmark = pytest.mark.integration


def test_plan_reset_stays_within_the_queue():
    assert plan_reset("earliest", None, 3, 10, 7, None) == 3
    assert plan_reset("latest", None, 3, 10, 7, None) == 10
    assert plan_reset("offset", 99, 3, 10, 7, None) == 10
    assert plan_reset("offset", 1, 3, 10, 7, None) == 3
    assert plan_reset("shift", -2, 3, 10, 7, None) == 5
    assert plan_reset("shift", -2, 3, 10, -1, None) == 3      # never committed: from the start
    assert plan_reset("timestamp", None, 3, 10, 7, 12) == 10


@pytest.fixture
def cli(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Admin", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for q in range(2):
            r = p.send_batch([Message("Admin", b"m%d-%d" % (q, i)) for i in range(50)],
                             queue=p.route("Admin").queues()[q])
            assert r.ok
    endpoint = ["--zookeeper", local_cluster.zookeeper, "--cluster", local_cluster.cluster]

    def run(*args, check=True):
        return run_cli(*args, *endpoint, check=check)
    return run


def as_json(p):
    return [json.loads(x) for x in p.stdout.splitlines() if x.strip()]


def offsets(run, group):
    d = as_json(run("group", "describe", group, "--json"))[0]
    return {(r["broker_group"], r["queue"]): r["offset"] for r in d["queues"]}, d


def test_groups_listed_described_and_reset_every_way(cli):
    cli("consume", "Admin", "--group", "g1", "--from", "first", "--count", "40", "--quiet")
    listed = {g["group"]: g for g in as_json(cli("group", "list", "--json"))[0]["groups"]}
    assert listed["g1"]["lag"] == 60 and "Admin" in listed["g1"]["topics"]
    got, d = offsets(cli, "g1")
    assert sum(got.values()) == 40 and d["total_lag"] == 60 and d["members"] == {}
    cli("group", "reset", "g1", "--topic", "Admin", "--to", "earliest")
    assert set(offsets(cli, "g1")[0].values()) == {0}
    cli("group", "reset", "g1", "--topic", "Admin", "--to", "latest")
    assert set(offsets(cli, "g1")[0].values()) == {50}
    cli("group", "reset", "g1", "--topic", "Admin", "--to", "offset", "5",
        "--queue", "broker-a/0")
    assert offsets(cli, "g1")[0] == {("broker-a", 0): 5, ("broker-a", 1): 50}
    cli("group", "reset", "g1", "--topic", "Admin", "--to", "shift", "-3")
    assert offsets(cli, "g1")[0] == {("broker-a", 0): 2, ("broker-a", 1): 47}
    future = str(int(time.time() * 1000) + 3_600_000)
    dry = as_json(cli("group", "reset", "g1", "--topic", "Admin", "--to", "timestamp", future,
                      "--dry-run", "--json"))[0]
    assert {r["new_offset"] for r in dry["queues"]} == {50} and dry["dry_run"]
    assert offsets(cli, "g1")[0] == {("broker-a", 0): 2, ("broker-a", 1): 47}   # unchanged
    for bad, says in ((["--to", "sideways"], "not one of"), (["--to", "offset"], "one value"),
                      (["--to", "offset", "-1"], "start at 0"),
                      (["--to", "earliest", "--queue", "broker-a/9"], "no such queue")):
        p = cli("group", "reset", "g1", "--topic", "Admin", *bad, check=False)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
    p = cli("group", "describe", "no-such-group", check=False)
    assert p.returncode == 2 and "no consumer group 'no-such-group'" in p.stderr


def test_topic_describe_shows_each_queues_offsets_and_master(cli):
    d = as_json(cli("topic", "describe", "Admin", "--json"))[0]
    rows = d["queue_offsets"]
    assert [(r["queue"], r["min_offset"], r["max_offset"]) for r in rows] == [(0, 0, 50),
                                                                            (1, 0, 50)]
    assert all(r["master"].startswith("tcp://127.0.0.1:") for r in rows)
    text = cli("topic", "describe", "Admin").stdout
    assert "master" in text and "messages" in text


def test_typos_are_refused_in_one_line(cli):
    p = cli("topic", "create", "T2", "--groups", "broker-zzz", check=False)
    assert p.returncode == 2 and "no broker group 'broker-zzz'" in p.stderr
    assert "broker-a" in p.stderr
    cli("topic", "create", "Ordered", "--queues", "4", "--order")
    p = cli("topic", "update", "Ordered", "--queues", "2", check=False)
    assert p.returncode == 2 and "--force" in p.stderr and "queues 2..3 dropped" in p.stderr
    cli("topic", "update", "Ordered", "--queues", "2", "--force")
    for args, says in ((["--count", "-5"], "--count must be at least 1"),
                       (["--batch", "0"], "--batch must be at least 1"),
                       (["--size", "-1"], "--size must be at least 0")):
        p = cli("produce", "Admin", *args, check=False)
        assert p.returncode == 2 and says in p.stderr


def test_produce_prints_an_id_per_message_and_counts_failures(cli):
    out = as_json(cli("produce", "Admin", "--count", "7", "--batch", "3", "--json",
                      "--key", "k1", "--property", "a=1", "--queue", "broker-a/1"))
    lines, summary = out[:-1], out[-1]
    assert len(lines) == 7 and len({x["msg_id"] for x in lines}) == 7
    assert {x["queue"] for x in lines} == {"broker-a/1"} and lines[0]["status"] == "SEND_OK"
    assert [x["queue_offset"] for x in lines] == list(range(50, 57))
    assert summary["sent"] == 7 and summary["failed"] == 0
    delayed = as_json(cli("produce", "Admin", "later", "--delay", "1h", "--queue", "broker-a/0",
                          "--json"))[-1]
    assert delayed["statuses"] == {"SEND_OK": 1}
    peek = as_json(cli("consume", "Admin", "--queue", "broker-a/0", "--offset", "50",
                       "--count", "1", "--until-idle", "0.5", "--json"))
    assert peek[-1]["consumed"] == 0                 # held by the broker for an hour
    p = cli("produce", "NoSuchTopic", "one", "--json", check=False)
    s = as_json(p)[-1]
    assert p.returncode == 1 and s["sent"] == 0 and s["failed"] == 1
    assert s["errors"] == {"TopicNotExistError": 1}


def test_an_unreachable_zookeeper_is_one_line_within_three_seconds():
    for where in ("127.0.0.1:1", "no-such-host.invalid:2181"):
        t0 = time.monotonic()
        p = run_cli("status", "--zookeeper", where, "--cluster", "C", check=False)
        took = time.monotonic() - t0
        assert p.returncode == 2 and took <= 4.5, (took, p.stderr)   # 3 s, and Python's start
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("duomq: cannot reach ZooKeeper"), \
            p.stderr


def test_ctrl_c_during_a_long_produce_says_what_was_sent(local_cluster, cli):
    import os
    import signal
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "duomq", "produce", "Admin", "--count",
                          "100000000", "--batch", "1", "--zookeeper", local_cluster.zookeeper,
                          "--cluster", local_cluster.cluster], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=os.environ)
    time.sleep(3.5)                       # a second of progress lines, at least
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130
    assert "interrupted: sent " in out and " failed" in out
    assert "produce Admin: " in err and "msg/s" in err          # progress on stderr


def test_peek_at_a_queue_without_a_group_and_bodies_as_text(cli):
    out = cli("consume", "Admin", "--queue", "broker-a/1", "--offset", "10", "--count", "3")
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and lines[0].endswith("broker-a/1@10 m1-10") \
        and lines[2].endswith("@12 m1-12"), lines
    js = as_json(cli("consume", "Admin", "--queue", "1", "--offset", "48", "--count", "5",
                     "--until-idle", "0.5", "--json"))
    assert [m["body"] for m in js[:-1]] == ["m1-48", "m1-49"] and js[-1]["next_offset"] == 50
    assert "peek" not in cli("group", "list").stdout          # no group, nothing committed
    p = cli("consume", "Admin", "--queue", "broker-a/1", "--offset", "99", "--count", "1",
            check=False)
    assert p.returncode == 2 and "outside" in p.stderr
    p = cli("consume", "Admin", "--count", "1", check=False)
    assert p.returncode == 2 and "--group GROUP is needed" in p.stderr


def test_status_of_a_cluster_that_is_not_there_and_a_reversed_range(local_cluster, cli):
    p = run_cli("status", "--zookeeper", local_cluster.zookeeper, "--cluster", "NoSuchCluster",
                check=False)
    assert p.returncode == 2 and "no cluster 'NoSuchCluster'" in p.stderr
    assert local_cluster.cluster in p.stderr                   # the clusters there are
    p = cli("message", "find", "--topic", "Admin", "--key", "k", "--begin", "2h",
            "--end", "3h", check=False)
    assert p.returncode == 2 and "--end is before --begin" in p.stderr


def test_a_reader_that_goes_away_gets_no_traceback(local_cluster, cli):
    import subprocess
    import sys
    p = subprocess.run(f"{sys.executable} -m duomq group list --zookeeper "
                       f"{local_cluster.zookeeper} --cluster {local_cluster.cluster} | head -0",
                       shell=True, capture_output=True, text=True)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr


def slave_offsets(local_cluster, group: str) -> dict:
    """The group's offsets as broker-a/1 (a slave) holds them."""
    from duomq.client import PullConsumer
    from duomq.proto import pb
    from duomq.testing.harness import member_node
    address = member_node(local_cluster.zookeeper, local_cluster.cluster, "broker-a", 1).address
    with PullConsumer("t", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        _s, _e, st = c.remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    return {(o.topic, o.queue_id): o.offset for o in st.group_offsets if o.consumer_group == group}


def test_a_group_is_deleted_on_the_master_and_its_slave(local_cluster, cli):
    from duomq.testing.harness import wait_for
    local_cluster.add_broker("broker-a", 1)                  # a slave
    cli("consume", "Admin", "--group", "old", "--from", "first", "--count", "7", "--quiet")
    wait_for(lambda: sum(slave_offsets(local_cluster, "old").values()) == 7, 20,
             "the slave to hold the group's offsets")
    out = as_json(cli("group", "delete", "old", "--json"))[0]
    assert out["offsets_removed"]["broker-a"] >= 1 and out["nodes_removed"]
    assert "old" not in {g["group"] for g in as_json(cli("group", "list", "--json"))[0]["groups"]}
    wait_for(lambda: not slave_offsets(local_cluster, "old"), 20,
             "the slave to forget the group")
    p = cli("group", "delete", "old", check=False)
    assert p.returncode == 2 and "no consumer group 'old'" in p.stderr
    from duomq.client import PushConsumer
    live = PushConsumer("live", topic="Admin", on_message=lambda m: None, zookeeper=local_cluster.zookeeper,
                        cluster=local_cluster.cluster).start()
    try:
        p = cli("group", "delete", "live", check=False)
        assert p.returncode == 2 and "1 live member(s)" in p.stderr and "stop them" in p.stderr
    finally:
        live.shutdown()


def test_broker_settings_are_read_and_the_runtime_ones_changed(cli):
    got = as_json(cli("broker", "config", "get", "broker-a", "max_pull_messages", "--json"))[0]
    assert got["broker-a/0"]["values"] == {"max_pull_messages": "1024"}
    said = cli("broker", "config", "set", "broker-a", "max_pull_messages=3").stdout
    assert "broker-a/0: max_pull_messages = 3 (until it restarts)" in said
    peek = as_json(cli("consume", "Admin", "--queue", "broker-a/0", "--count", "10", "--json"))
    assert len(peek) == 11                                   # still all ten, 3 a pull
    p = cli("broker", "config", "set", "broker-a", "port=1", check=False)
    assert p.returncode == 2 and "cannot change while the broker runs" in p.stderr
    p = cli("broker", "config", "get", "broker-zzz", check=False)
    assert p.returncode == 2 and "no live broker 'broker-zzz'" in p.stderr
    table = cli("broker", "config", "get", "broker-a").stdout
    assert "max_pull_messages" in table and "runtime" in table


def zk_tree(zookeeper: str, root: str) -> dict[str, bytes]:
    """Every node under ``root`` with its data, but the data of the nodes a
    live cluster rewrites by itself (member nodes, the master's lease, the
    in-sync set, epochs, the users)."""
    from duomq.coordinator import zk as zkutil
    zk = zkutil.connect(zookeeper)
    out: dict[str, bytes] = {}
    try:
        todo = [root]
        while todo:
            path = todo.pop()
            data, _ = zk.get(path)
            volatile = "/members/" in path or path.endswith(("/master", "/isr")) \
                or "/epochs" in path
            out[path] = b"" if volatile else data
            todo += [f"{path}/{c}" for c in zk.get_children(path)]
    finally:
        zkutil.close(zk)
    return out


def test_failed_and_dry_run_commands_write_nothing(cli, local_cluster):
    """Every command that fails, reads or runs --dry-run leaves ZooKeeper and
    the store as they were: a typo in a message id's broker group registered
    a phantom group (and topics then got queues on it), a dry-run reset made
    the group's retry topics, a send to a topic that does not exist left its
    route node, a peek made two internal topics."""
    from duomq.cli.status_cmd import collect
    run = cli
    run("group", "reset", "g0", "--topic", "Admin", "--to", "earliest")   # a group that exists
    from duomq.coordinator.paths import ZkPaths
    root = ZkPaths(local_cluster.cluster).cluster_root

    def state():
        st = collect(local_cluster.zookeeper, local_cluster.cluster)
        return zk_tree(local_cluster.zookeeper, root), \
            [(b["group"], b["id"], b.get("max")) for b in st["brokers"]]
    before = state()
    for args in (("message", "get", "broker-zz:0000000000000000"),
                 ("message", "get", "broker-a:FFFFFFFFFFFF0000"),
                 ("group", "reset", "nosuchgroup", "--topic", "Admin", "--to", "earliest",
                  "--dry-run"),
                 ("group", "reset", "g0", "--topic", "Admin", "--to", "latest", "--dry-run"),
                 ("produce", "NoSuch", "x"),
                 ("consume", "Admin", "--queue", "broker-a/0", "--count", "2"),
                 ("consume", "NoSuch", "--queue", "broker-a/0", "--count", "1"),
                 ("failover", "broker-a", "--to", "7"),
                 ("topic", "describe", "NoSuch"),
                 ("topic", "list"),
                 ("group", "describe", "nosuchgroup"),
                 ("dlq", "list", "--group", "nosuchgroup"),
                 ("status",)):
        run(*args, check=False)
        after = state()
        assert after[1] == before[1], args                 # nothing stored
        new = sorted(set(after[0]) - set(before[0]))
        gone = sorted(set(before[0]) - set(after[0]))
        changed = sorted(p for p in before[0] if p in after[0] and before[0][p] != after[0][p])
        assert (new, gone, changed) == ([], [], []), (args, new, gone, changed)


def test_topic_groups_are_set_as_told_and_a_group_with_no_broker_is_removed(cli, local_cluster):
    """`topic update --groups` sets the topic's list (a group taken off needs
    --force), `--queues` alone changes only the groups it has (it had
    spread the topic over every registered group); `cluster remove-group`
    forgets a group with no broker (a phantom, or a retired one) and takes
    it off every topic, refusing a live group and a topic that lives on it
    alone."""
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.paths import ZkPaths
    run = cli
    b = local_cluster.add_broker("broker-b", 0)

    def queues(topic):
        return as_json(run("topic", "describe", topic, "--json"))[0]["queues"]

    run("topic", "create", "Spread", "--queues", "2", "--groups", "broker-a")
    run("topic", "update", "Spread", "--queues", "3")
    assert queues("Spread") == {"broker-a": 3}                  # not spread to broker-b
    run("topic", "update", "Spread", "--groups", "broker-a,broker-b")
    assert queues("Spread") == {"broker-a": 3, "broker-b": 3}
    refused = run("topic", "update", "Spread", "--groups", "broker-b", check=False)
    assert refused.returncode == 2 and "takes broker-a off topic 'Spread'" in refused.stderr
    assert queues("Spread") == {"broker-a": 3, "broker-b": 3}
    run("topic", "create", "OnlyB", "--queues", "1", "--groups", "broker-b")
    live = run("cluster", "remove-group", "broker-b", check=False)
    assert live.returncode == 2 and "has registered broker(s) 0" in live.stderr
    b.stop()
    alone = run("cluster", "remove-group", "broker-b", check=False)
    assert alone.returncode == 2 and "topic(s) OnlyB live on 'broker-b' alone" in alone.stderr
    run("topic", "delete", "OnlyB")
    dry = run("cluster", "remove-group", "broker-b", "--dry-run")
    assert "would remove broker group broker-b (its queues on Spread)" in dry.stdout
    assert queues("Spread") == {"broker-a": 3, "broker-b": 3}
    run("cluster", "remove-group", "broker-b")
    assert queues("Spread") == {"broker-a": 3}
    zk = zkutil.connect(local_cluster.zookeeper)
    try:
        assert not zk.exists(ZkPaths(local_cluster.cluster).broker_group("broker-b"))
        # a phantom group (as a typo in a message id once registered one) goes too
        zk.ensure_path(ZkPaths(local_cluster.cluster).members("broker-zz"))
        run("topic", "update", "Spread", "--groups", "broker-a,broker-zz")
        run("cluster", "remove-group", "broker-zz")
        assert not zk.exists(ZkPaths(local_cluster.cluster).broker_group("broker-zz"))
    finally:
        zkutil.close(zk)
    assert queues("Spread") == {"broker-a": 3}
    unknown = run("cluster", "remove-group", "broker-q", check=False)
    assert unknown.returncode == 2 and "no broker group 'broker-q'" in unknown.stderr
