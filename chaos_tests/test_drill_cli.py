"""``duomq drill run`` against a dev cluster, as a user runs it: exit code,
report, plot, and a clear refusal when the cluster cannot host a scenario."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from duomq.testing.harness import master_info, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def duomq(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "duomq", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def drill_run(env, report, scenario: str, rounds: int = 1, *extra: str):
    """`duomq drill run` that must pass: the process and its JSON report."""
    p = duomq("drill", "run", "--scenario", scenario, "--rounds", str(rounds), "--report",
              str(report), *extra, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return p, json.loads(report.read_text())


@pytest.fixture
def dev(tmp_path, zk_hosts):
    env = dict(os.environ, DUOMQ_DEV_DIR=str(tmp_path / "dev"))
    started = []

    def up(*args, ensemble=False, segment=8 << 20, own_zookeeper=False, session_ms=4000):
        zk = ["--zookeepers", "3"] if ensemble else [] if own_zookeeper else \
            ["--zookeeper", zk_hosts]
        if "--store-size" in args:          # store files sized to the volume, not the suite's
            for name in ("DUOMQ_SEGMENT_SIZE_BYTES", "DUOMQ_INDEX_SLOT_COUNT",
                         "DUOMQ_INDEX_MAX_ENTRIES"):
                env.pop(name, None)
        p = duomq("dev", "up", *zk, "--cluster", f"Drill{len(started)}",
                  "--set", f"zk_session_timeout_ms={session_ms}",
                  "--set", f"segment_size_bytes={segment}",
                  *args, env=env)
        assert p.returncode == 0, p.stderr
        started.append(True)
        return env
    yield up
    if started:
        duomq("dev", "down", env=env)


def test_kill_master_drill_on_a_sync_pair(dev, tmp_path):
    """Under the mixed load: delayed and transactional producers beside the
    plain ones, each kind acked and read back, no id naming two messages, no
    exception that is not a duomq error."""
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync")
    report, plot = tmp_path / "drill.json", tmp_path / "drill.png"
    p, r = drill_run(env, report, "kill-master", 2, "--plot", str(plot), "--load", "mixed")
    assert r["rounds"] == 2 and r["lost"] == 0 and r["unexpected"] == 0
    assert r["split_brain_s"] == 0 and r["guarantees_held"]
    assert r["id_conflicts"] == 0 and r["foreign_errors"] == {}
    assert r["duplicated"] == r["duplicated_rewrites"]
    kinds = r["notes"]["acked_by_kind"]
    assert set(kinds) == {"plain", "delayed", "timer", "transactional"} and \
        min(kinds.values()) > 0
    # every acked timer (any time, or a level) fired, the new master alone included;
    # one fired just before a kill may fire again: counted, and a re-write
    assert r["timers_acked"] == kinds["delayed"] + kinds["timer"] and r["timers_lost"] == 0
    assert r["timers_fired_twice"] <= r["duplicated_rewrites"]
    assert re.search(rf"timers acked/lost/fired twice +{r['timers_acked']} / 0 / \d", p.stdout)
    back = r["notes"]["read_back_by_kind"]
    assert all(back[k] >= n for k, n in kinds.items()), r["notes"]
    assert "message ids naming two messages  0" in p.stdout
    assert all(t is not None and t < 20 for t in r["rto_s"]), r["rto_s"]
    assert [pr["epoch_after"] - pr["epoch_before"] for pr in r["per_round"]] == [1, 1]
    # each round read every message acked so far back while its master was still dead
    # (the heal restarts it): none was unreadable on the new master
    reads = [pr["read_under_fault"] for pr in r["per_round"]]
    assert reads[0] > 0 and reads[1] > reads[0], reads
    assert [pr["unreadable_under_fault"] for pr in r["per_round"]] == [0, 0]
    assert r["unreadable_under_fault"] == 0 and "acked, unreadable under a fault" in p.stdout
    assert "guarantees held" in p.stdout and "RTO p50" in p.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_zookeeper_outage_drill_writes_go_on_and_nobody_fails_over(dev, tmp_path):
    """Every ZooKeeper server paused 10 s (the dev cluster's own, SIGSTOP)
    under idempotent load on a master and two slaves, SYNC + SYNC_FLUSH,
    with the default session timeout."""
    env = dev("--slaves", "2", "--flush", "sync", "--replication", "sync",
              own_zookeeper=True, session_ms=15000)
    p, r = drill_run(env, tmp_path / "outage.json", "zookeeper-outage", 1)
    (rd,) = r["per_round"]
    assert "SIGSTOP every ZooKeeper server" in rd["fault"] and rd["held_s"] == 10.0
    assert rd["epoch_after"] == rd["epoch_before"], rd          # no failover
    assert rd["longest_gap_s"] < 2.0 and r["longest_gap_s"] < 2.0, rd
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["guarantees_held"], r


def test_session_expiry_and_a_random_schedule_replayed_by_its_seed(dev, tmp_path):
    """A session expiry, then a random schedule run twice with one seed
    under the mixed load: the same faults at the same times, nothing lost
    (no timer either), no rule left behind (the
    random scenario on a sync pair: test_every_scenario_runs_on_a_sync_pair
    runs each of its parts)."""
    env = dev("--slaves", "2", "--flush", "sync", "--replication", "sync",
              own_zookeeper=True, session_ms=4000)
    p, r = drill_run(env, tmp_path / "expiry.json", "zookeeper-session-expiry", 1,
                     "--duration", "6")
    (rd,) = r["per_round"]
    assert rd["epoch_after"] == rd["epoch_before"] + 1 and rd["held_s"] == 6.0, rd
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["guarantees_held"], r
    runs = []
    for i in range(2):
        p, r = drill_run(env, tmp_path / f"random{i}.json", "random", 2, "--seed", "11",
                         "--duration", "4", "--load", "mixed")
        assert "seed 11 (replay with --seed 11)" in p.stderr and r["notes"]["seed"] == 11
        assert r["lost"] == 0 and r["guarantees_held"], r
        assert r["duplicated"] == r["duplicated_rewrites"], r      # timers, commits: re-writes
        assert r["timers_acked"] > 0 and r["timers_lost"] == 0, r
        runs.append([(pr["scenario"], pr["held_s"]) for pr in r["per_round"]])
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        assert r["notes"]["fault_tag"] not in rules, "the drill left iptables rules behind"
    assert runs[0] == runs[1], runs                  # the same schedule, replayed


def test_a_group_without_a_slave_cannot_host_kill_master(dev):
    env = dev()
    p = duomq("drill", "run", "--scenario", "kill-master", "--rounds", "1", env=env)
    assert p.returncode == 2
    assert "has no slave" in p.stderr, p.stderr


def test_external_driver_times_a_fault_somebody_else_injects(dev, tmp_path, zk_hosts):
    """--driver external: the drill injects nothing; here the test plays the
    user (`duomq dev kill`, then `duomq dev start`), and the drill times it."""
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync")
    report = tmp_path / "external.json"
    drill = subprocess.Popen([sys.executable, "-m", "duomq", "drill", "run", "--scenario",
                              "kill-master", "--driver", "external", "--rounds", "1",
                              "--fault-timeout", "60", "--report", str(report)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in drill.stderr:
            if "waiting for a fault" in line:
                break
        time.sleep(1.0)                                   # some load before the fault
        before = master_info(zk_hosts, "Drill0").epoch
        assert duomq("dev", "kill", "broker-a/0", env=env).returncode == 0

        def new_epoch():
            m = master_info(zk_hosts, "Drill0")
            return m is not None and m.epoch > before
        wait_for(new_epoch, 20, "the election")
        time.sleep(1.0)                                   # writes at the new epoch
        assert duomq("dev", "start", "broker-a/0", env=env).returncode == 0
        out, err = drill.communicate(timeout=180)
    finally:
        drill.kill()
    assert drill.returncode == 0, out + err
    r = json.loads(report.read_text())
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and rd["epoch_after"] == rd["epoch_before"] + 1
    # seen as the master changing (its lease expired) before its member node
    # goes with its session, or as both
    assert ("master 0 -> 1" in rd["fault"] or "broker-a/0 gone" in rd["fault"]) \
        and 0 < r["rto_s"][0] < 20, r


def test_kill_zookeeper_leader_of_an_ensemble(dev, tmp_path):
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync", ensemble=True)
    report = tmp_path / "zk.json"
    p, r = drill_run(env, report, "kill-zookeeper", 1)
    (rd,) = r["per_round"]
    assert "(leader)" in rd["fault"] and r["lost"] == 0 and r["rto_s"][0] < 20
    assert rd["epoch_after"] == rd["epoch_before"]     # the brokers kept their sessions


def test_kill_zookeeper_needs_an_ensemble(dev):
    env = dev("--slaves", "1")
    p = duomq("drill", "run", "--scenario", "kill-zookeeper", "--rounds", "1", env=env)
    assert p.returncode == 2 and "--zookeepers 3" in p.stderr, p.stderr


SYNC_PAIR = ("--slaves", "1", "--flush", "sync", "--replication", "sync")


@pytest.mark.parametrize("scenario,rounds", [
    ("kill-slave", 1), ("pause-master", 1), ("partition-master-zookeeper", 1),
    ("partition-master-slave", 1), ("partition-clients-master", 1), ("reset-replication", 1)])
def test_every_scenario_runs_on_a_sync_pair(dev, tmp_path, scenario, rounds):
    env = dev(*SYNC_PAIR)
    report = tmp_path / f"{scenario}.json"
    p, r = drill_run(env, report, scenario, rounds)
    assert r["rounds"] == rounds and r["lost"] == 0 and r["unexpected"] == 0, r
    assert r["split_brain_s"] == 0 and r["guarantees_held"]
    assert all(t is not None and t < 30 for t in r["rto_s"]), r["rto_s"]
    tag = r["notes"]["fault_tag"]
    assert tag.startswith("duomq-drill-")
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert tag not in rules, "the drill left iptables rules behind"


@pytest.mark.skipif(os.geteuid() != 0, reason="store volumes are loop mounts: root only")
def test_disk_full_master_refuses_writes_loses_nothing_and_writes_come_back(dev, tmp_path):
    env = dev(*SYNC_PAIR, "--store-size", "64M", segment=1 << 20)
    report = tmp_path / "disk.json"
    p, r = drill_run(env, report, "disk-full-master", 1)
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["guarantees_held"], r
    assert rd["refused_after_s"] is not None and rd["writes_back_after_heal_s"] < 10, rd
    assert rd["epoch_after"] == rd["epoch_before"]          # a full disk elects nobody
    st = json.loads(duomq("dev", "status", "--json", env=env).stdout)
    master = next(b for b in st["brokers"] if b["role"] == "MASTER")
    assert master["volume_free_bytes"] > 16 << 20            # the fill file is gone
    with open(master["log"]) as f:
        log = f.read()
    assert any("cannot store" in line and "No space left on device" in line
               for line in log.splitlines()), log[-3000:]
    # a full disk is logged once per service and episode (a service that
    # works again between two fills logs each), never once per write
    failed = re.findall(r" ERROR duomq\.common\.service: (\S+) failed; trying again", log)
    back = re.findall(r" INFO duomq\.common\.service: (\S+) works again", log)
    assert failed, log[-3000:]
    for name in set(failed):
        assert failed.count(name) <= back.count(name) + 1, (name, failed, back)
    lines = log.splitlines()
    reported = [lines[i - 1] for i, line in enumerate(lines)      # the records a traceback
                if line.startswith("Traceback") and i and re.match(r"\d{4}-", lines[i - 1])]
    assert len(reported) == len(failed), reported               # follows: the services' only


def test_a_broker_that_cannot_write_says_so_while_it_cannot(dev):
    """A master's store volume filled: while it stays full its member node,
    `duomq status`, its readiness probe and its /metrics say it cannot write
    (ZooKeeper's view called such a group healthy), and once the disk has
    room again the first write clears all four."""
    import urllib.request

    from duomq.client import Producer
    from duomq.drill.faults import Broker, LocalDriver
    env = dev(*SYNC_PAIR, "--store-size", "64M", segment=1 << 20)
    st = json.loads(duomq("dev", "status", "--json", env=env).stdout)
    m = next(b for b in st["brokers"] if b["role"] == "MASTER")
    driver = LocalDriver(env["DUOMQ_DEV_DIR"], st["zookeeper"], "writable")
    duomq("topic", "create", "Full", "--queues", "1", env=env)
    zk, cl = st["zookeeper"], st["cluster"]

    def said() -> tuple[str, bool, str, float]:
        status = json.loads(duomq("status", "--json", env=env).stdout)
        row = next(b for b in status["brokers"] if b["role"] == "MASTER")
        ready = duomq("health", "--ready", "--address", m["address"], "--json", env=env)
        text = urllib.request.urlopen(m["metrics"], timeout=5).read().decode()
        gauge = float(re.search(r"^duomq_store_writable (\S+)$", text, re.M).group(1))
        return row.get("cannot_write", ""), ready.returncode == 0, ready.stdout, gauge
    try:
        driver.fill_disk(Broker(m["group"], m["id"], "MASTER", m["pid"], m["address"], ""))
        with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=10_000, retry_times_when_send_failed=0) as p:
            wait_for(lambda: not _sends(p), 60, "a write refused for want of room")
            wait_for(lambda: said()[0], 10, "the member node to say it cannot write")
            cannot, ready, why, gauge = said()
            assert "No space left on device" in cannot, cannot
            assert not ready and "whose store cannot write" in why, why
            assert gauge == 0.0
            driver.free_disk()
            wait_for(lambda: _sends(p), 30, "writes to come back")
            wait_for(lambda: said()[0] == "", 10, "the member node to say it writes again")
            cannot, ready, why, gauge = said()
            assert ready and gauge == 1.0, why
    finally:
        driver.free_disk()


def _sends(p) -> bool:
    from duomq.client import Message
    from duomq.common.errors import DuomqError
    try:
        return p.send(Message("Full", b"x" * 4096)).ok
    except DuomqError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="store volumes are loop mounts: root only")
def test_disk_full_master_needs_a_volume_of_its_own(dev):
    env = dev(*SYNC_PAIR)
    p = duomq("drill", "run", "--scenario", "disk-full-master", "--rounds", "1", env=env)
    assert p.returncode == 2 and "--store-size" in p.stderr, p.stderr


def test_share_group_drills_kill_a_reader_and_the_master(dev, tmp_path):
    """`--consumer share`: three SimpleConsumer processes of a share group read
    along; kill-consumer kills the one holding the most, kill-master kills a
    SYNC pair's master under the mixed load (timers come due and
    transactions commit on the lone master, read by the share group). Every
    stored message is acked exactly once (or dead-lettered), none is
    delivered after its ack."""
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync")
    for scenario in ("kill-consumer", "kill-master"):
        mixed = ("--load", "mixed") if scenario == "kill-master" else ()
        p, r = drill_run(env, tmp_path / f"{scenario}.json", scenario, 2, "--consumer", "share",
                         "--consumers", "3", *mixed)
        share = r["notes"]["share"]
        assert r["guarantees_held"] and r["lost"] == 0, r["verdict"]
        assert share["drained"] and share["unaccounted"] == 0, share
        assert share["acked_twice"] == 0 and share["delivered_after_ack"] == 0, share
        assert share["acked"] + share["acks_unknown"] + share["dead_lettered"] >= \
            r["notes"]["read_back"] > 0, share
        assert "share group:" in p.stdout
        if mixed:
            kinds = r["notes"]["acked_by_kind"]
            assert set(kinds) == {"plain", "delayed", "timer", "transactional"}, kinds
            assert min(kinds.values()) > 0 and r["unreadable_under_fault"] == 0, r["notes"]
            assert r["id_conflicts"] == 0 and r["foreign_errors"] == {}
            # a body acked under two ids was stored twice: a re-write the audit saw too
            assert share["copies_acked"] <= r["duplicated_rewrites"] == r["duplicated"], share
        if scenario == "kill-consumer":
            assert share["readers_killed"] == 2, share
            # what the killed readers held, every one delivered again
            assert share["redeliveries"] >= share["held_by_killed"], share
    bad = duomq("drill", "run", "--scenario", "kill-consumer", "--rounds", "1", env=env)
    assert bad.returncode != 0 and "--consumer share" in bad.stdout + bad.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="store volumes are loop mounts: root only")
def test_timers_due_on_a_full_disk_wait_for_room_and_fire_once(dev):
    """300 acked timers come due while the master's store volume is full
    (the fired copies, the index's checkpoint and the progress cannot be
    written): the broker keeps serving, none fires early or is lost, and
    once the disk has room each fires exactly once."""
    import threading

    from duomq.client import Message, Producer, PushConsumer
    from duomq.drill.faults import Broker, LocalDriver
    env = dev("--store-size", "64M", segment=1 << 20)
    st = json.loads(duomq("dev", "status", "--json", env=env).stdout)
    m = next(b for b in st["brokers"] if b["role"] == "MASTER")
    driver = LocalDriver(env["DUOMQ_DEV_DIR"], st["zookeeper"], "timers")
    duomq("topic", "create", "Timed", "--queues", "2", env=env)
    zk, cl = st["zookeeper"], st["cluster"]
    lock, got = threading.Lock(), {}

    def arrived(msg):
        with lock:
            got.setdefault(msg.body, []).append(time.time())

    c = PushConsumer("timed", topic="Timed", on_message=arrived, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_threads=0).start()
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            at = int(time.time() * 1000) + 5000
            due = {b"t%03d" % i: at + i * 7 for i in range(300)}
            for lo in range(0, 300, 50):
                assert p.send_batch([Message("Timed", b, deliver_at_ms=t) for b, t in
                                     list(due.items())[lo:lo + 50]]).ok
        driver.fill_disk(Broker(m["group"], m["id"], "MASTER", m["pid"], m["address"], ""))
        time.sleep(max(0.0, (at + 2100) / 1000 - time.time() + 2))    # all due, the disk full
        assert os.path.exists(f"/proc/{m['pid']}"), "the master died on a full disk"
        with open(m["log"]) as f:
            log = f.read()
        assert "No space left on device" in log, log[-3000:]
        with lock:
            early = len(got)
        driver.free_disk()
        wait_for(lambda: len(got) == len(due), 30, "every timer once the disk has room")
        time.sleep(1.0)
    finally:
        driver.free_disk()
        c.shutdown()
    assert all(len(v) == 1 for v in got.values()), "a timer fired twice"
    assert all(min(got[b]) >= t / 1000 - 0.002 for b, t in due.items()), "a timer came early"
    print(f"{early} of 300 delivered while the disk was full (what was fired before it filled)")
