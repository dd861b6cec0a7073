"""The Spark source and sink against a secured cluster (auth = true), with
the option ``credentials``: a reader user reads, a writer user writes, and
a query without credentials fails with the error that says they are needed."""

import os
import subprocess
import sys

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.message import MessageQueue

pytestmark = pytest.mark.integration


def duomq(*args):
    p = subprocess.run([sys.executable, "-m", "duomq", *args], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture
def secured(local_cluster, tmp_path, monkeypatch):
    keys = tmp_path / "keys"
    duomq("auth", "init", "--out", str(keys))
    monkeypatch.setenv("DUOMQ_CREDENTIALS", str(keys / "admin.json"))   # the harness's
    local_cluster.add_broker("broker-a", 0, auth=True, auth_dir=str(keys))
    local_cluster.create_topic("Clicks", 2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    users = {}
    for name, allow in (("reader", ["Topic:Clicks:Sub", "Group:duomq-spark:Sub"]),
                        ("writer", ["Topic:Clicks:Pub"])):
        users[name] = str(tmp_path / f"{name}.json")
        duomq("auth", "user", "add", name, *[a for p in allow for a in ("--allow", p)],
              "--out", users[name], "--zookeeper", zk, "--cluster", cl, "--credentials",
              str(keys / "admin.json"))
    users["admin"] = str(keys / "admin.json")
    monkeypatch.delenv("DUOMQ_CREDENTIALS", raising=False)
    return local_cluster, users


def test_read_and_write_with_credentials(spark, secured):
    cluster, users = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    with Producer(zookeeper=zk, cluster=cl, credentials=users["admin"]) as p:
        assert p.send_batch([Message("Clicks", b"c%03d" % i) for i in range(100)]).ok

    def reader(**extra):
        r = spark.read.format("duomq").option("zookeeper", zk).option("cluster", cl) \
            .option("topic", "Clicks")
        for k, v in extra.items():
            r = r.option(k, v)
        return r.load()

    assert reader(credentials=users["reader"]).count() == 100
    with pytest.raises(Exception, match="credentials are needed"):
        reader().count()
    df = spark.createDataFrame([(b"w%02d" % i,) for i in range(30)], "body binary")
    df.write.format("duomq").option("zookeeper", zk).option("cluster", cl) \
        .option("topic", "Clicks").option("credentials", users["writer"]).mode("append").save()
    with PullConsumer("audit", zookeeper=zk, cluster=cl, credentials=users["admin"]) as c:
        total = sum(c.max_offset(MessageQueue("Clicks", "broker-a", q)) for q in (0, 1))
    assert total == 130
    with pytest.raises(Exception, match="lacks the permission Topic:Clicks:Pub"):
        df.write.format("duomq").option("zookeeper", zk).option("cluster", cl) \
            .option("topic", "Clicks").option("credentials", users["reader"]) \
            .mode("append").save()
    assert os.path.exists(users["reader"])
