"""The prod overlay's pods, secured, as containers of the images `make
image` builds: a three-server ZooKeeper ensemble and the broker pair
broker-a, each started as its StatefulSet's pod would be (image, arguments,
the environment the kubelet builds, the ConfigMap's duomq.toml, uid 10001,
a read-only root, the data claim as a volume, the pod's DNS names, on a
podman network), with `components/auth` and the `duomq-credentials` and `duomq-zookeeper-tls` Secrets
made as deploy/k8s/README.md says (`duomq auth init`, then `kubectl create
secret generic --from-file`, the real kubectl, client side). The
manifests' own startup, readiness and liveness probes and preStop hook run
inside them (`podman exec`), dialling the brokers with the brokers' key;
the CLI runs in an admin container holding the admin's credentials (the
broker pods have none). A client without credentials is refused at once,
by the brokers and by ZooKeeper; a user's client container (`duomq auth
user add`, its credentials mounted as a Secret) keeps producing while the
master is handed over, then killed (kill -9 of its container), and each
time restarted; the audit reads everything back. The Spark image then runs
the CronJob's pod against the pair with its user's credentials. The pods
are the session's (tests/deploy/conftest.py): test_containers_drill.py's
drills run on them after these tests.

What is not as in a cluster: the ZooKeeper pods run the real server from
the jars in the duomq-spark image, through the manifest's own command and
a copy of the official image's entrypoint (tests/deploy/zookeeper_image),
because this host cannot pull `zookeeper:3.8.4`, and without ZooKeeper's
Prometheus metrics provider, whose jar that image has and pyspark's do not;
CPU and memory limits are not applied. Run alone with `pytest -m containers`.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from duomq.testing.drill_reports import REPORT_DIR
from duomq.testing.harness import wait_for
from duomq.testing.k8s import named
from duomq.testing.kube_driver import KubeDriver
from duomq.testing.podman import podman
from duomq.testing.pods import PodContainer
from duomq.testing.prod_pods import (
    BROKER_IMAGE,
    SPARK_IMAGE,
    secret,
)
from duomq.testing.prod_pods import client_progress as progress

pytestmark = [pytest.mark.integration, pytest.mark.containers, pytest.mark.slow]

HERE = pathlib.Path(__file__).resolve().parent


# an anonymous ZooKeeper session trying to write the cluster's topics: over
# TLS with the cluster's CA (public: it is in every user's credentials)
ZK_WRITE = """
import os, sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
open("/tmp/ca.pem", "w").write(sys.argv[1])
zk = KazooClient(os.environ["DUOMQ_ZOOKEEPER"], use_ssl=True, ca="/tmp/ca.pem", check_hostname=True)
zk.start(15)
try:
    zk.create("/duomq/" + os.environ["DUOMQ_CLUSTER"] + "/topics/Forged", b"{}")
    print("written")
except NoAuthError:
    print("NoAuthError")
zk.stop()
"""
# a plaintext client of ZooKeeper: the TLS port gives it no session, and the
# plaintext one (the probes') does not listen on the pod's address
ZK_PLAIN = """
import os, socket
from kazoo.client import KazooClient
zk = KazooClient(os.environ["DUOMQ_ZOOKEEPER"])
try:
    zk.start(6)
    print("session")
except Exception as exc:
    print("no session:", type(exc).__name__)
zk.stop()
host = os.environ["DUOMQ_ZOOKEEPER"].split(",")[0].split(":")[0]
for port in (2181, 2182):
    try:
        with socket.create_connection((host, port), 3) as s:
            s.sendall(b"srvr")
            s.settimeout(3)
            print(port, "answered" if s.recv(100) else "no answer")
    except ConnectionRefusedError:
        print(port, "refused")
    except OSError:                              # TLS waits for a whole record: a time-out
        print(port, "no answer")
"""


@pytest.fixture
def cluster(prod_pods, request):
    """The session's pods (tests/deploy/conftest.py), every broker ready
    (an earlier test may have restarted one); their containers' logs are
    printed when a test fails."""
    pods = prod_pods
    for pod in pods.brokers:
        pods.wait_ready(pod)
    yield pods
    rep = getattr(request.node, "rep_call", None)
    if rep is None or rep.failed:
        print(pods.logs())


def user_credentials(cluster, name: str, *allow: str) -> pathlib.Path:
    """`duomq auth user add NAME --allow ...` in the admin's container; a
    directory holding its credentials.json, as its Secret would mount."""
    rc, said = cluster.cli("auth", "user", "add", name, *(a for p in allow for a in ("--allow", p)),
                           "--out", f"/users/{name}.json")
    assert rc == 0, said
    out = cluster.root / f"user-{name}"
    out.mkdir()
    (out / "credentials.json").write_bytes((cluster.root / "admin-out" / f"{name}.json")
                                           .read_bytes())
    (out / "credentials.json").chmod(0o644)
    return out


def test_a_stranger_is_refused_at_once_by_the_brokers_and_zookeeper(cluster):
    for pod in cluster.brokers:
        rc, keys = pod.exec(["ls", "/var/run/secrets/duomq"], 10)
        # their own keys and the CA: never the ensemble's private key
        assert keys.split() == ["admin-user.key", "broker.key", "broker.key_secret",
                                "metrics.token", "zookeeper-ca.pem", "zookeeper.secret"], keys
    for pod in cluster.zk:                       # only the ensemble's key, certificate and CA
        rc, keys = pod.exec(["ls", "/var/run/secrets/zookeeper-tls"], 10)
        assert keys.split() == ["ca.pem", "server.pem"], keys
    assert cluster.cluster_env["DUOMQ_ZOOKEEPER"].count(":2182") == 3
    stranger = cluster.client("stranger", BROKER_IMAGE, ["sleep", "infinity"], [], [])
    try:
        started = time.monotonic()
        rc, said = stranger.exec(["duomq", "topic", "list"], 60)
        assert rc == 2 and "speaks only TLS" in said, said
        rc, said = stranger.exec(["duomq", "produce", "Orders", "hello"], 60)
        assert rc != 0 and "speaks only TLS" in said, said
        assert time.monotonic() - started < 20, "refused only after a timeout"
        rc, said = stranger.exec(["python", "-c", ZK_PLAIN], 60)
        assert said.split("\n")[:3] == ["no session: KazooTimeoutError",
                                        "2181 refused", "2182 no answer"], said
        ca = (cluster.root / "keys" / "zookeeper-ca.pem").read_text()
        rc, said = stranger.exec(["python", "-c", ZK_WRITE, ca], 60)
        assert said.strip() == "NoAuthError", said
    finally:
        stranger.kill()


def test_the_prod_pair_in_containers_hands_over_fails_over_and_loses_nothing(cluster):
    a0, a1 = cluster.brokers
    rc, out = cluster.cli("topic", "create", "Orders", "--queues", "4")
    assert rc == 0, out
    # the pod's user, nothing written outside its volumes, and the image's
    # own HEALTHCHECK (for Docker and podman users) agrees with the probes
    for pod in cluster.brokers:
        assert pod.handle.healthcheck()[0] == 0, pod.handle.healthcheck()
        assert pod.exec(["id", "-u"], 10) == (0, "10001\n")
        assert pod.exec(["touch", "/opt/x"], 10)[0] != 0, "the root file system is writable"

    out = cluster.root / "client"
    out.mkdir()
    os.chmod(out, 0o777)
    # a user with Orders and any group only (the audit reads in a group of its own)
    app = user_credentials(cluster, "app", "Topic:Orders:Pub", "Topic:Orders:Sub", "Group:*:Sub")
    client = cluster.client("drill-client", BROKER_IMAGE, ["python", "/client/drill_client.py"],
                            ["--topic", "Orders", "--out", "/out"],
                            [f"{HERE}:/client:ro", f"{out}:/out",
                             f"{app}:/var/run/secrets/duomq-app:ro"],
                            env={"DUOMQ_CREDENTIALS": "/var/run/secrets/duomq-app/credentials.json"})
    faults = out / "faults"
    try:
        wait_for(lambda: progress(out)["acked"] >= 300, 60, "acked sends before the hand-over")
        rc, said = client.exec(["duomq", "topic", "create", "Other"], 60)
        assert rc == 2 and "ZooKeeper refused" in said, said      # users make no topics

        # planned: the kubelet deletes the master's pod: preStop, then SIGTERM
        master = cluster.master()
        other = a1 if master is a0 else a0
        faults.write_text(f"{time.monotonic()}\n")
        rc, said = master.pre_stop()
        assert rc == 0 and "handed broker-a over" in said, said
        assert cluster.roles(other)[cluster.brokers.index(other)] == "MASTER"
        assert master.stop() < 30 and master.handle.state()["ExitCode"] == 0, master.handle.logs()
        t_stopped = time.monotonic() - float(faults.read_text())
        master.restart()                      # the StatefulSet recreates it: a slave now
        cluster.wait_ready(master)
        print(f"hand-over: stopped at +{t_stopped:.2f}, ready again at "
              f"+{time.monotonic() - float(faults.read_text()):.2f}")
        assert cluster.roles()[cluster.brokers.index(master)] == "SLAVE"

        # unplanned: kill -9 of the new master's container
        acked = progress(out)["acked"]
        wait_for(lambda: progress(out)["acked"] >= acked + 300, 60, "acked sends before the kill")
        victim, survivor = other, master
        killed_at = time.monotonic()
        with faults.open("a") as f:
            f.write(f"{killed_at}\n")
        victim.handle.kill("KILL")
        wait_for(lambda: cluster.master_id(survivor) == cluster.brokers.index(survivor), 60,
                 "the slave to take over")
        took_over_s = time.monotonic() - killed_at

        def alone():                          # stored by the survivor, its slave away
            return progress(out).get("statuses", {}).get("SLAVE_NOT_AVAILABLE", 0)
        before = alone()
        wait_for(lambda: alone() >= before + 100, 60, "writes to the survivor alone")
        victim.restart()
        cluster.wait_ready(victim)
        assert cluster.roles()[cluster.brokers.index(victim)] == "SLAVE"
        rejoined_s = time.monotonic() - killed_at
        acked = progress(out)["acked"]
        wait_for(lambda: progress(out)["acked"] >= acked + 200, 60, "SEND_OK with the pair whole")
    except BaseException:
        print(f"--- the client ({progress(out)})\n{client.logs()}\n--- status: "
              f"{cluster.status_error}")
        raise
    finally:
        (out / "stop").touch()
    assert client.wait(180) == 0, client.logs()
    report = json.loads((out / "report.json").read_text())
    report["notes"] = {"took_over_s": round(took_over_s, 2), "rejoined_s": round(rejoined_s, 2)}
    os.makedirs(REPORT_DIR, exist_ok=True)
    with open(os.path.join(REPORT_DIR, "containers.json"), "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    with open(os.path.join(REPORT_DIR, "containers-client.log"), "w") as f:
        f.write(client.logs(100_000))
    print("containers drill: " + json.dumps(report, sort_keys=True))
    assert report["acked"] + report["acked_degraded"] >= 800
    assert report["lost"] == 0 and report["unexpected"] == 0, report
    handed, killed = report["after_faults"]
    assert handed["stored_gap_s"] is not None and killed["stored_gap_s"] is not None, report

    # both brokers hold the same log, and only uid 10001 wrote their volumes
    wait_for(lambda: len({b.get("max_offset") for b in cluster.status()["brokers"]}) == 1, 30,
             "the slave to catch up")
    for pod in cluster.brokers:
        owners = {p.stat().st_uid for p in (pod.dir / "claims").rglob("*")}
        assert owners == {10001}, f"{pod.name}: files owned by {owners}"
        assert pod.probe("livenessProbe") == 0


def test_the_spark_cronjob_pod_runs_against_the_pair(cluster):
    """The CronJob's pod from the duomq-spark image: its arguments and
    environment, pinned to slave reads, its user's credentials from the
    Secret the README makes; its probes answered while it runs; it stops by
    itself having written the closed minutes."""
    for pod in cluster.brokers:
        cluster.wait_ready(pod)
    rc, out = cluster.cli("topic", "create", "ShopEvents", "--queues", "2")
    assert rc == 0, out
    spark = user_credentials(cluster, "spark", "Topic:*:Sub", "Group:*:Sub")
    docs = [*cluster.docs, secret("duomq-spark-credentials", cluster.docs, spark)]
    # its output also goes to a file of ours: conmon may flush a finished
    # container's log to `podman logs` only after a while
    out = cluster.root / "shop-producer"
    out.mkdir()
    os.chmod(out, 0o777)
    producer = cluster.client(
        "shop-producer", SPARK_IMAGE,
        ["sh", "-c", 'python -m pipeline.produce "$@" > /out/log 2>&1; rc=$?; cat /out/log; '
                     'exit $rc', "sh"],
        ["--minutes", "6", "--per-minute", "40"],
        [f"{out}:/out", f"{cluster.root / 'admin-credentials'}:/var/run/secrets/duomq-admin:ro"],
        env={"DUOMQ_CREDENTIALS": "/var/run/secrets/duomq-admin/admin.json"})
    assert producer.wait(120) == 0, (out / "log").read_text()
    said = (out / "log").read_text().strip()
    assert json.loads(said.splitlines()[-1])["sent"] == 240, said

    job = named(docs, "CronJob", "spark-minutes")
    pod = PodContainer(cluster.net, docs, job, cluster.root, pod_name="spark-minutes-manual")
    assert pod.env["DUOMQ_CREDENTIALS"] == "/var/run/secrets/duomq-spark/credentials.json"
    pod.start()
    passed: set[str] = set()
    probes = {"startupProbe", "livenessProbe", "readinessProbe"}
    while pod.handle.running() and passed != probes:
        for which in probes - passed:
            if pod.probe(which) == 0:
                passed.add(which)
        time.sleep(0.5)
    assert passed == probes, f"the job ended with only {sorted(passed)} passed:\n" \
        + pod.handle.logs(60)
    assert pod.handle.wait(300) == 0, pod.handle.logs(60)
    state = pod.dir / "claims" / "spark-minutes"
    written = list((state / "minutes").glob("*.parquet"))
    assert written
    wait_for(lambda: "clicks" in pod.handle.logs(60), 10, "the closed minutes in the job's log")
    assert {p.stat().st_uid for p in state.rglob("*")} == {10001}


def rollout(kubectl: str, driver_url: str, *args: str) -> tuple[int, dict, str]:
    """`duomq rollout ... --json` on the host, its kubectl the test's driver."""
    p = subprocess.run([sys.executable, "-m", "duomq", "rollout", "--kubectl", kubectl,
                        "--namespace", "duomq", "--timeout", "180", "--json", *args],
                       capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "DUOMQ_KUBE_DRIVER": driver_url})
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        out = {}
    return p.returncode, out, p.stderr


def test_a_rollout_upgrades_the_pair_with_one_hand_over_under_load(cluster, tmp_path):
    """An image change rolled by `duomq rollout` through kubectl (the
    test's driver serves it over these pods: testing/kube_driver.py) while
    a client produces: the slave first, back in sync, then one hand-over,
    then the old master; every pod on the new image; nothing acked lost."""
    for pod in cluster.brokers:
        cluster.wait_ready(pod)
    old = cluster.brokers[0].image
    new = derived(tmp_path, old, f"{old.rsplit(':', 1)[1]}-rollout",
                  "LABEL io.duomq.test=rollout")
    rc, said = cluster.cli("topic", "create", "Rollout", "--queues", "4")
    assert rc == 0, said
    out = cluster.root / "rollout-client"
    out.mkdir()
    os.chmod(out, 0o777)
    app = user_credentials(cluster, "roller", "Topic:Rollout:Pub", "Topic:Rollout:Sub",
                           "Group:*:Sub")
    client = cluster.client("rollout-client", BROKER_IMAGE, ["python", "/client/drill_client.py"],
                            ["--topic", "Rollout", "--out", "/out"],
                            [f"{HERE}:/client:ro", f"{out}:/out",
                             f"{app}:/var/run/secrets/duomq-app:ro"],
                            env={"DUOMQ_CREDENTIALS": "/var/run/secrets/duomq-app/credentials.json"})
    driver = KubeDriver(cluster)
    kubectl = driver.script(tmp_path)
    try:
        # up to date: nothing to do
        rc, report, err = rollout(kubectl, driver.url)
        assert rc == 0 and report["groups"][0]["up_to_date"], (report, err)
        wait_for(lambda: progress(out)["acked"] >= 300, 60, "acked sends before the rollout")
        driver.set_image("broker-a", new)
        master = cluster.master()
        slave = next(p for p in cluster.brokers if p is not master)
        uids = {n: st.uid for n, st in driver.pods.items()}
        rc, report, err = rollout(kubectl, driver.url, "--dry-run")
        assert rc == 0, (report, err)
        assert [(s["step"], s["pod"]) for s in report["groups"][0]["steps"]] == [
            ("restart-slave", slave.name), ("hand-over", master.name),
            ("restart-old-master", master.name)], report
        assert {n: st.uid for n, st in driver.pods.items()} == uids     # nothing touched
        (out / "faults").write_text(f"{time.monotonic()}\n")
        rc, report, err = rollout(kubectl, driver.url)
        print(err)
        assert rc == 0 and report["ok"], (report, err, driver.log[-20:])
        (group,) = report["groups"]
        assert group["hand_overs"] == 1 and group["epoch_after"] == group["epoch_before"] + 1
        assert [s["step"] for s in group["steps"]] == ["restart-slave", "hand-over",
                                                       "restart-old-master"]
        for pod in cluster.brokers:              # every broker runs the new image
            assert pod.image == new
            inspected = json.loads(podman("inspect", pod.handle.name).stdout)[0]
            assert inspected["ImageName"].endswith(new.split("/", 1)[1]), inspected["ImageName"]
        assert cluster.roles()[cluster.brokers.index(slave)] == "MASTER"
        acked = progress(out)["acked"]
        wait_for(lambda: progress(out)["acked"] >= acked + 200, 60, "SEND_OK after the rollout")
        rc, again, err = rollout(kubectl, driver.url)
        assert rc == 0 and again["groups"][0]["up_to_date"], (again, err)
    except BaseException:
        print(f"--- the client ({progress(out)})\n{client.logs()}\n--- kubectl asked:\n"
              + "\n".join(driver.log[-40:]))
        raise
    finally:
        (out / "stop").touch()
        driver.close()
    assert client.wait(180) == 0, client.logs()
    result = json.loads((out / "report.json").read_text())
    gap = result["after_faults"][0]
    print(f"rollout: {group['seconds']} s, steps "
          + ", ".join(f"{s['step']} {s['seconds']} s" for s in group["steps"])
          + f"; longest gap without SEND_OK {gap['send_ok_gap_s']} s, without a store "
          f"{gap['stored_gap_s']} s; client: " + json.dumps(
              {k: result[k] for k in ("attempted", "acked", "acked_degraded", "failed", "lost",
                                      "duplicated")}))
    with open(os.path.join(REPORT_DIR, "rollout.json"), "w") as f:
        json.dump({"rollout": report, "client": result}, f, indent=2, sort_keys=True)
    assert result["lost"] == 0 and result["unexpected"] == 0, result
    assert result["failed"] == 0, result      # retries absorbed the hand-over


def derived(tmp_path, base: str, tag: str, *lines: str) -> str:
    """An image built on ``base`` with ``lines`` added (offline, instantly)."""
    image = f"{base.rsplit(':', 1)[0]}:{tag}"
    (tmp_path / f"{tag}.Containerfile").write_text(f"FROM {base}\n" + "\n".join(lines) + "\n")
    podman("build", "-q", "--network", "none", "-t", image, "-f",
           str(tmp_path / f"{tag}.Containerfile"), str(tmp_path), timeout_s=300)
    return image


def test_a_rollout_stops_at_a_revision_that_does_not_come_back_then_resumes(cluster, tmp_path):
    """A revision whose broker never starts: the rollout restarts the slave,
    waits, and stops there (exit 1), the master untouched (no hand-over, its
    image and epoch as before). With a good revision applied, the next
    rollout mends the broken slave first and finishes with one hand-over."""
    for pod in cluster.brokers:
        cluster.wait_ready(pod)
    base = cluster.brokers[0].image
    broken = derived(tmp_path, base, "broken", 'ENTRYPOINT ["sh", "-c", "echo broken; exit 1"]')
    good = derived(tmp_path, base, "mended", "LABEL io.duomq.test=mended")
    driver = KubeDriver(cluster)
    kubectl = driver.script(tmp_path)
    try:
        master = cluster.master()
        rc, out = master.exec(["duomq", "health", "--ready", "--json"], 30)
        epoch = json.loads(out)["epoch"]
        driver.set_image("broker-a", broken)
        rc, report, err = rollout(kubectl, driver.url, "--timeout", "12")
        assert rc == 1 and not report["ok"], (report, err)
        assert "back on the new revision, ready and in sync: not done in 12 s" in \
            report["stopped"], report
        assert "hand" not in err.split("restart slave", 1)[1], err     # never got that far
        assert cluster.master() is master and master.image == base
        rc, out = master.exec(["duomq", "health", "--ready", "--json"], 30)
        assert json.loads(out)["epoch"] == epoch and json.loads(out)["role"] == "MASTER"
        driver.set_image("broker-a", good)
        rc, report, err = rollout(kubectl, driver.url)
        assert rc == 0 and report["ok"], (report, err, driver.log[-20:])
        (group,) = report["groups"]
        assert group["hand_overs"] == 1 and group["epoch_after"] == epoch + 1
        assert all(pod.image == good for pod in cluster.brokers)
    except BaseException:
        print("--- kubectl asked:\n" + "\n".join(driver.log[-40:]) + "\n" + cluster.logs())
        raise
    finally:
        driver.close()


def test_a_slaves_backup_restores_a_broker_that_rejoins_and_serves_all(cluster, tmp_path):
    """deploy/k8s/README.md's backup and restore: a point-in-time copy of a
    slave's store (here the container frozen while its claim is copied, as
    a VolumeSnapshot is taken at an instant), more messages sent after it,
    the slave's store lost and the copy put in its place: the broker
    recovers it, rejoins as a slave, copies what it lacks from the master,
    and once the master is handed to it serves every message, in order."""
    for pod in cluster.brokers:
        cluster.wait_ready(pod)
    rc, said = cluster.cli("topic", "create", "Backup", "--queues", "1")
    assert rc == 0, said
    before = [f"before-{i}" for i in range(200)]
    after = [f"after-{i}" for i in range(200)]
    rc, said = cluster.cli("produce", "--quiet", "Backup", *before)
    assert rc == 0, said
    master = cluster.master()
    slave = next(p for p in cluster.brokers if p is not master)
    wait_for(lambda: len({b.get("max_offset") for b in cluster.status()["brokers"]}) == 1, 30,
             "the slave to hold all")
    claim, backup = slave.dir / "claims" / "data", tmp_path / "backup"
    podman("pause", slave.handle.name)          # one instant, as a snapshot
    try:
        subprocess.run(["cp", "-a", str(claim), str(backup)], check=True, timeout=300)
    finally:
        podman("unpause", slave.handle.name)
    rc, said = cluster.cli("produce", "--quiet", "Backup", *after)
    assert rc == 0, said
    # the slave's volume is lost; its claim made again from the backup
    slave.stop()
    subprocess.run(["rm", "-rf", str(claim)], check=True)
    subprocess.run(["cp", "-a", str(backup), str(claim)], check=True, timeout=300)
    slave.restart()
    cluster.wait_ready(slave)                   # ready: a slave in sync again
    sid = cluster.brokers.index(slave)
    rc, said = cluster.cli("failover", "broker-a", "--to", str(sid))
    assert rc == 0, said
    assert cluster.roles()[sid] == "MASTER"
    rc, said = cluster.cli("consume", "Backup", "--queue", "0", "--offset", "0", "--count",
                           "400", "--format", "text", "--until-idle", "5", "--json",
                           timeout_s=120)
    assert rc == 0, said
    bodies = [json.loads(line)["body"] for line in said.splitlines()
              if line.startswith("{") and '"body"' in line]
    assert bodies == before + after, (len(bodies), bodies[:3], bodies[-3:])
