"""Clients outside the brokers' network (issue 43's external access): a
broker registers, beside the address its own network dials
(``advertised_host``), the one outside clients dial (``external_host``,
``external_port``); a client with ``external = true`` (or
``$DUOMQ_EXTERNAL=true``) dials that one for every broker it reaches, the
address it learnt from a route, a member node or a broker's advice. Here the
advertised address is one nobody reaches (TEST-NET-1, 192.0.2.1), the
external one the broker's real port: an inside client cannot send, an
outside one sends and reads back, and the CLI too."""

import os
import subprocess
import sys

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.errors import DuomqError
from duomq.common.message import PullStatus

pytestmark = pytest.mark.integration

UNREACHABLE = "192.0.2.1"


@pytest.fixture
def outside(local_cluster):
    b = local_cluster.add_broker("broker-a", 0, advertised_host=UNREACHABLE,
                                 external_host="127.0.0.1")
    local_cluster.create_topic("Ext", 1)
    return local_cluster, b


def test_an_external_client_dials_the_external_address(outside):
    c, b = outside
    # an inside client dials the advertised address: nothing there
    with Producer(zookeeper=c.zookeeper, cluster=c.cluster, send_timeout_ms=2000,
                  retry_times_when_send_failed=0) as inside:
        with pytest.raises(DuomqError):
            inside.send(Message("Ext", b"never"))
    with Producer(zookeeper=c.zookeeper, cluster=c.cluster, external=True) as p:
        sent = [p.send(Message("Ext", f"m{i}".encode())) for i in range(20)]
    assert {r.status.name for r in sent} == {"SEND_OK"}
    with PullConsumer("ext", zookeeper=c.zookeeper, cluster=c.cluster, external=True) as consumer:
        (mq,) = consumer.queues("Ext")
        r = consumer.pull(mq, 0, 100)
    assert r.status is PullStatus.FOUND
    assert [m.body for m in r.messages] == [f"m{i}".encode() for i in range(20)]


def test_the_cli_outside_the_network(outside):
    c, _b = outside
    env = {**os.environ, "DUOMQ_EXTERNAL": "true", "DUOMQ_ZOOKEEPER": c.zookeeper,
           "DUOMQ_CLUSTER": c.cluster}
    p = subprocess.run([sys.executable, "-m", "duomq", "produce", "Ext", "hello", "--quiet"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "duomq", "consume", "Ext", "--queue", "0",
                        "--count", "1", "--format", "text"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "hello" in p.stdout, p.stdout + p.stderr


def test_a_broker_without_an_external_address_is_dialled_as_it_is_and_said(local_cluster,
                                                                           caplog):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Plain", 1)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster, external=True) as p:
        assert p.send(Message("Plain", b"x")).status.name == "SEND_OK"
    assert any("registers no external address" in r.getMessage() for r in caplog.records)
