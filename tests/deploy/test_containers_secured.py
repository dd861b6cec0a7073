"""The prod pods of test_containers.py, secured as deploy/k8s/README.md
says: the prod overlay with ``components/auth``, the ``duomq-credentials``
Secret made by ``duomq auth init`` and ``kubectl create secret generic
--from-file`` (the real kubectl, client side), the broker pods reading
their keys from it. The brokers' probes and preStop hand-over dial them
with the brokers' own key; the CLI runs in an admin container holding the
admin's credentials (the broker pods have none); users are added with
`duomq auth user add`, and their credentials mounted as the Secrets the
README makes. A client with no credentials is refused at once, by the
brokers and by ZooKeeper; a user's client keeps producing while the master
is handed over, and nothing acked is lost; the Spark CronJob's pod reads
with its user's credentials.

What is not as in a cluster: as in test_containers.py. Run alone with
`pytest -m containers`.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import pytest

from duomq.testing.harness import wait_for
from duomq.testing.k8s import named
from duomq.testing.pods import PodContainer
from duomq.testing.prod_pods import (
    BROKER_IMAGE,
    SPARK_IMAGE,
    client_progress,
    running,
    secret,
    secured_docs,
)

pytestmark = [pytest.mark.integration, pytest.mark.containers, pytest.mark.slow]

HERE = pathlib.Path(__file__).resolve().parent
# an anonymous ZooKeeper session trying to write the cluster's routes
ZK_WRITE = """
import os
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
zk = KazooClient(os.environ["DUOMQ_ZOOKEEPER"])
zk.start(15)
try:
    zk.set("/duomq/" + os.environ["DUOMQ_CLUSTER"] + "/topics/Orders", b"{}")
    print("written")
except NoAuthError:
    print("NoAuthError")
zk.stop()
"""


@pytest.fixture(scope="module")
def pods(images, tmp_path_factory):
    root = tmp_path_factory.mktemp("secured-pods")
    docs, admin = secured_docs(root)
    with running(root, docs=docs, admin=admin) as c:
        yield c


@pytest.fixture
def cluster(pods, request):
    yield pods
    rep = getattr(request.node, "rep_call", None)
    if rep is None or rep.failed:
        print(pods.logs())


def user_credentials(cluster, name: str, *allow: str) -> pathlib.Path:
    """`duomq auth user add NAME --allow ...` in the admin's container; the
    directory holding its credentials.json, as its Secret would mount."""
    out = cluster.root / f"user-{name}"
    out.mkdir()
    os.chmod(out, 0o777)
    rc, said = cluster.cli("auth", "user", "add", name, *(a for p in allow for a in ("--allow", p)),
                           "--out", f"/users/{name}.json")
    assert rc == 0, said
    written = cluster.root / "admin-out" / f"{name}.json"
    (out / "credentials.json").write_bytes(written.read_bytes())
    (out / "credentials.json").chmod(0o644)
    return out


def test_a_secured_prod_pair_refuses_strangers_and_hands_over_losing_nothing(cluster):
    a0, a1 = cluster.brokers
    # the probes passed (the cluster started), each over CURVE with the brokers' key
    for pod in cluster.brokers:
        env = dict(e.split("=", 1) for e in pod.exec(["env"], 10)[1].splitlines() if "=" in e)
        assert env["DUOMQ_AUTH"] == "true"
        assert pod.exec(["ls", env["DUOMQ_AUTH_DIR"]], 10)[1].split() == \
            ["admin-user.key", "broker.key", "broker.key_secret", "zookeeper.secret"]
    rc, out = cluster.cli("topic", "create", "Orders", "--queues", "4")
    assert rc == 0, out

    # no credentials: the broker's CLI and ZooKeeper refuse at once
    stranger = cluster.client("stranger", BROKER_IMAGE, ["sleep", "infinity"], [], [])
    started = time.monotonic()
    rc, said = stranger.exec(["duomq", "produce", "Orders", "hello"], 60)
    assert rc != 0 and "credentials" in said, said
    assert time.monotonic() - started < 15, "refused only after a timeout"
    rc, said = stranger.exec(["python", "-c", ZK_WRITE], 60)
    assert said.strip() == "NoAuthError", said
    stranger.kill()

    # a user with Orders and any group only
    app = user_credentials(cluster, "app", "Topic:Orders:Pub", "Topic:Orders:Sub", "Group:*:Sub")
    out = cluster.root / "client"
    out.mkdir()
    os.chmod(out, 0o777)
    client = cluster.client("drill-client", BROKER_IMAGE, ["python", "/client/drill_client.py"],
                            ["--topic", "Orders", "--out", "/out"],
                            [f"{HERE}:/client:ro", f"{out}:/out",
                             f"{app}:/var/run/secrets/duomq-app:ro"],
                            env={"DUOMQ_CREDENTIALS": "/var/run/secrets/duomq-app/credentials.json"})
    try:
        wait_for(lambda: client_progress(out)["acked"] >= 300, 60, "acked sends")
        # it may not create topics
        rc, said = client.exec(["duomq", "topic", "create", "Other"], 60)
        assert rc != 0, said

        master = cluster.master()
        other = a1 if master is a0 else a0
        (out / "faults").write_text(f"{time.monotonic()}\n")
        rc, said = master.pre_stop()            # the slave takes over: it follows over CURVE
        assert rc == 0 and "handed broker-a over" in said, said
        assert master.stop() < 30, master.handle.logs()
        master.restart()
        cluster.wait_ready(master)
        assert cluster.roles()[cluster.brokers.index(other)] == "MASTER"
        assert cluster.roles()[cluster.brokers.index(master)] == "SLAVE"
        acked = client_progress(out)["acked"]
        wait_for(lambda: client_progress(out)["acked"] >= acked + 300, 60,
                 "SEND_OK after the hand-over, the pair whole")
    except BaseException:
        print(f"--- the client ({client_progress(out)})\n{client.logs()}\n--- status: "
              f"{cluster.status_error}")
        raise
    finally:
        (out / "stop").touch()
    assert client.wait(180) == 0, client.logs()
    report = json.loads((out / "report.json").read_text())
    print("secured containers: " + json.dumps(report, sort_keys=True))
    assert report["acked"] >= 600
    assert report["lost"] == 0 and report["unexpected"] == 0, report
    # the new slave caught up with the master over the secured replication port
    wait_for(lambda: len({b.get("max_offset") for b in cluster.status()["brokers"]}) == 1, 30,
             "the slave to catch up")


def test_the_spark_cronjob_pod_reads_with_its_users_credentials(cluster):
    for pod in cluster.brokers:
        cluster.wait_ready(pod)
    rc, out = cluster.cli("topic", "create", "ShopEvents", "--queues", "2")
    assert rc == 0, out
    # the README's steps: the job's user, then its Secret
    spark = user_credentials(cluster, "spark", "Topic:*:Sub", "Group:*:Sub")
    docs = [*cluster.docs, secret("duomq-spark-credentials", cluster.docs, spark)]

    log = cluster.root / "shop-producer"
    log.mkdir()
    os.chmod(log, 0o777)
    admin = "/var/run/secrets/duomq-admin"
    producer = cluster.client(
        "shop-producer", SPARK_IMAGE,
        ["sh", "-c", 'python -m pipeline.produce "$@" > /out/log 2>&1; rc=$?; cat /out/log; '
                     'exit $rc', "sh"],
        ["--minutes", "6", "--per-minute", "40"],
        [f"{log}:/out", f"{cluster.root / 'admin-credentials'}:{admin}:ro"],
        env={"DUOMQ_CREDENTIALS": f"{admin}/admin.json"})
    assert producer.wait(120) == 0, (log / "log").read_text()
    said = (log / "log").read_text().strip()
    assert json.loads(said.splitlines()[-1])["sent"] == 240, said

    job = named(docs, "CronJob", "spark-minutes")
    pod = PodContainer(cluster.net, docs, job, cluster.root, pod_name="spark-minutes-secured")
    assert pod.env["DUOMQ_CREDENTIALS"] == "/var/run/secrets/duomq-spark/credentials.json"
    pod.start()
    assert pod.handle.wait(300) == 0, pod.handle.logs(60)
    written = list((pod.dir / "claims" / "spark-minutes" / "minutes").glob("*.parquet"))
    assert written, pod.handle.logs(60)
