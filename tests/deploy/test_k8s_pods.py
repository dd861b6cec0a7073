"""What the manifests run, run here against real processes: a broker pair
started as the prod StatefulSet's pods would be (the container's arguments,
the environment the kubelet builds, the mounted ConfigMap), probed with the
manifest's own probe commands, stopped through its preStop hook and
SIGTERM; and the ZooKeeper probes asked of a real ZooKeeper."""

import os
import signal
import subprocess
import sys
import time

import pytest
from duomq.client import Message, Producer, PullConsumer, SendStatus
from duomq.dev.harness import LocalCluster, master_info, wait_for
from duomq.dev.k8s import container_env, mounted_config, named, render
from duomq.dev.ports import free_port

pytestmark = pytest.mark.integration
BIN = os.path.dirname(sys.executable)      # where `duomq` is installed, as on the image's PATH


class Pod:
    """One pod of a StatefulSet, on this host. What cannot be as in a cluster
    is overridden and nothing else: ZooKeeper is the test's, both pods share
    127.0.0.1 (so ports differ and the advertised host is 127.0.0.1, there
    being no cluster DNS), and the volumes are directories."""

    def __init__(self, docs, sts, ordinal: int, root, zookeeper: str):
        self.spec = sts["spec"]["template"]["spec"]
        (self.container,) = self.spec["containers"]
        self.name = f"{sts['metadata']['name']}-{ordinal}"
        self.ordinal = ordinal
        env = container_env(docs, sts, self.container, self.name)
        volume = root / self.name
        volume.mkdir()
        config = volume / "duomq.toml"
        config.write_text(mounted_config(docs, self.spec, self.container, env["DUOMQ_CONFIG"]))
        self.port = free_port()
        env.update(DUOMQ_CONFIG=str(config), DUOMQ_ZOOKEEPER=zookeeper,
                   DUOMQ_DATA_DIR=str(volume / "data"), DUOMQ_ADVERTISED_HOST="127.0.0.1",
                   DUOMQ_PORT=str(self.port), DUOMQ_HA_PORT=str(free_port()))
        self.env = {**os.environ, **env, "PATH": BIN + os.pathsep + os.environ["PATH"]}
        self.cluster = env["DUOMQ_CLUSTER"]
        self.log = volume / "container.log"
        self.proc = None

    def start(self):
        with open(self.log, "ab") as log:     # the image's ENTRYPOINT is ["duomq"]
            self.proc = subprocess.Popen(["duomq", *self.container["args"]], env=self.env,
                                         stdout=log, stderr=subprocess.STDOUT)
        return self

    def exec(self, command, timeout_s):
        p = subprocess.run(command, env=self.env, capture_output=True, text=True,
                           timeout=timeout_s)
        return p.returncode, p.stdout + p.stderr

    def probe(self, which: str) -> int:
        probe = self.container[which]
        return self.exec(probe["exec"]["command"], probe["timeoutSeconds"] + 5)[0]

    def pre_stop(self):
        hook = self.container["lifecycle"]["preStop"]["exec"]["command"]
        return self.exec(hook, self.spec["terminationGracePeriodSeconds"])

    def terminate(self) -> float:
        """SIGTERM, as the kubelet after preStop; seconds until it exited."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(self.spec["terminationGracePeriodSeconds"])
        return time.monotonic() - t0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_a_prod_broker_pair_lives_through_probes_prestop_and_a_restart(zk_hosts, tmp_path):
    docs = render("overlays/prod")
    sts = named(docs, "StatefulSet", "broker-a")
    pods = [Pod(docs, sts, i, tmp_path, zk_hosts) for i in range(sts["spec"]["replicas"])]
    cluster = pods[0].cluster
    try:
        for pod in pods:                          # podManagementPolicy: Parallel
            pod.start()
        for pod in pods:
            wait_for(lambda: pod.probe("startupProbe") == 0, 30, f"{pod.name} to start")
            wait_for(lambda: pod.probe("readinessProbe") == 0, 30, f"{pod.name} to be ready")
            assert pod.probe("livenessProbe") == 0
        LocalCluster(zk_hosts, cluster, str(tmp_path)).create_topic("Orders", queues=2)
        with Producer(zk_hosts, cluster) as p:    # prod: SYNC double-write, SYNC_FLUSH
            results = [p.send(Message("Orders", b"order-%d" % i)) for i in range(200)]
        assert {r.status for r in results} == {SendStatus.SEND_OK}

        master_id = master_info(zk_hosts, cluster)["broker_id"]
        master, slave = pods[master_id], pods[1 - master_id]
        rc, out = master.pre_stop()               # the kubelet deletes the master's pod
        assert rc == 0 and "handed broker-a over" in out, out
        assert master_info(zk_hosts, cluster)["broker_id"] == slave.ordinal
        assert master.terminate() < 20
        assert master.proc.returncode == 0, master.log.read_text()[-2000:]

        master.start()                            # the StatefulSet recreates it: a slave now
        wait_for(lambda: master.probe("readinessProbe") == 0, 30, "the old master to be ready")
        assert master_info(zk_hosts, cluster)["broker_id"] == slave.ordinal
        t0 = time.monotonic()
        rc, out = master.pre_stop()               # a slave leaves without a hand-over
        assert rc == 0 and "without a hand-over" in out and time.monotonic() - t0 < 10, out
        with Producer(zk_hosts, cluster) as p:
            assert p.send(Message("Orders", b"after")).status is SendStatus.SEND_OK
        with PullConsumer(zk_hosts, cluster, group="audit") as c:
            bodies = []
            for q in c.queues("Orders"):
                got = c.pull(q, 0, max_messages=1000, max_wait_ms=2000)
                bodies += [m.body for m in got.messages]
        assert sorted(bodies) == sorted([b"order-%d" % i for i in range(200)] + [b"after"])
    finally:
        for pod in pods:
            pod.kill()


def zk_probe(container, which, port):
    command = container[which]["exec"]["command"]
    p = subprocess.run(command, env={**os.environ, "ZK_CLIENT_PORT": str(port)},
                       capture_output=True, text=True, timeout=10)
    return p.returncode


def test_zookeeper_probes_against_a_real_server(zk_server):
    zk = named(render("overlays/prod"), "StatefulSet", "zk")
    (container,) = zk["spec"]["template"]["spec"]["containers"]
    port = int(zk_server.connect.rsplit(":", 1)[1])
    assert zk_probe(container, "livenessProbe", port) == 0        # ruok: imok
    assert zk_probe(container, "readinessProbe", port) == 0       # srvr: Mode: standalone
    closed = free_port()
    assert zk_probe(container, "livenessProbe", closed) != 0
    assert zk_probe(container, "readinessProbe", closed) != 0


def test_the_spark_cronjob_runs_and_answers_its_probes(local_cluster, tmp_path):
    """The CronJob's container, as the spark image runs it: its arguments
    after ``python -m pipeline.minutes``, its environment, its probes asked
    while it runs; it stops by itself having written the closed minutes."""
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    sys.path.insert(0, examples)
    from pipeline import events, produce
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.create_topic("ShopEvents", 2)
    start = (int(time.time() * 1000) // events.MINUTE_MS - 6) * events.MINUTE_MS
    produce.send(local_cluster.zookeeper, local_cluster.cluster, "ShopEvents",
                 events.generate(start, 5, 40))

    docs = render("overlays/prod")
    job = named(docs, "CronJob", "spark-minutes")
    (c,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = container_env(docs, job, c, "spark-minutes-1")
    env.update(DUOMQ_ZOOKEEPER=local_cluster.zookeeper, DUOMQ_CLUSTER=local_cluster.cluster,
               HOME=str(tmp_path), PYTHONPATH=examples)
    env = {**os.environ, **env, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    port = str(free_port())         # 4040 in the pod; any free port here

    def here(words):
        return [w.replace("/state", str(tmp_path / "state")).replace("4040", port)
                for w in words]

    def probe(which):
        return subprocess.run(here(c[which]["exec"]["command"]), env=env,
                              capture_output=True, timeout=10).returncode

    log = tmp_path / "job.log"
    with open(log, "wb") as out:    # its own session: the Spark JVM goes with it on a kill
        job_proc = subprocess.Popen([sys.executable, "-m", "pipeline.minutes", *here(c["args"])],
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    passed = set()
    try:
        # each probe must pass while the job runs, as the kubelet asks them
        while job_proc.poll() is None and len(passed) < 3:
            for which in {"startupProbe", "livenessProbe", "readinessProbe"} - passed:
                if probe(which) == 0 and job_proc.poll() is None:
                    passed.add(which)
            time.sleep(0.2)
        assert passed == {"startupProbe", "livenessProbe", "readinessProbe"}, \
            f"the job ended with only {sorted(passed)} passed:\n{log.read_text()[-3000:]}"
        assert job_proc.wait(240) == 0, log.read_text()[-3000:]
    finally:
        if job_proc.poll() is None:
            os.killpg(job_proc.pid, signal.SIGKILL)
            job_proc.wait(30)
    # the driver is gone: the probe fails once its JVM, which outlives the
    # Python process by a moment, has stopped serving the UI
    wait_for(lambda: probe("livenessProbe") != 0, timeout_s=30,
             what="the liveness probe to fail after the job ended")
    written = [f for f in os.listdir(tmp_path / "state" / "minutes") if f.endswith(".parquet")]
    assert written and "clicks" in log.read_text()      # the closed minutes, shown at the end
