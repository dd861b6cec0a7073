"""pytest fixtures shared by tests/ and chaos_tests/ (their conftest files
import them): a real ZooKeeper for the whole run (testcontainers when a Docker
engine answers, else a local server), a chroot per test, and real broker
processes whose logs are printed when a test fails.

Brokers started by tests preallocate 64 MiB commit-log segments instead of the
default 1 GiB (``DUOMQ_SEGMENT_SIZE_BYTES``, unless the run sets it): each
broker reserves its first segment with fallocate, and with 1 GiB a run of the
suite reserved 25 GB of disk, which a CI machine need not have. Key-index
files likewise reserve 2 MB of slots instead of 20 MB."""

from __future__ import annotations

import os
import uuid

import pytest

from duomq.coordinator import zk as zkutil
from duomq.dev import ports
from duomq.dev.zookeeper import launch
from duomq.drill.netfilter import Netfilter
from duomq.testing.harness import LocalCluster, run_cli

TEST_SEGMENT_BYTES = 64 << 20
TEST_INDEX_SLOTS = 500_000


def pytest_configure(config):
    os.environ.setdefault("DUOMQ_SEGMENT_SIZE_BYTES", str(TEST_SEGMENT_BYTES))
    # a key-index file reserves 4 bytes per slot: 2 MB here instead of 20 MB
    os.environ.setdefault("DUOMQ_INDEX_SLOT_COUNT", str(TEST_INDEX_SLOTS))
    # each pytest-xdist worker (and what it starts) picks server ports from
    # its own slice: two workers' brokers never start on one port
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit():
        os.environ.setdefault(ports.SLICE_ENV, f"{worker[2:]}/{count}")


# Fixtures whose tests run on one pytest-xdist worker, in the order
# collected (make test runs two, ``--dist loadgroup``): the images' tests
# (tests/deploy/conftest.py) share one build and one prod cluster, and no
# two of them may start containers of the same names at once.
WORKER_GROUPS = {"images": "images"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        for fixture, group in WORKER_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


def _failed(request) -> bool:
    rep = getattr(request.node, "rep_call", None)
    return rep is None or rep.failed


@pytest.fixture(scope="session")
def zk_server():
    handle = launch(os.environ.get("DUOMQ_TEST_ZOOKEEPER"))
    yield handle
    handle.stop()


@pytest.fixture
def zk_hosts(zk_server, request):
    """A connect string with a fresh chroot for this test."""
    chroot = f"/duomqtest-{uuid.uuid4().hex[:12]}"
    zk = zkutil.connect(zk_server.connect)
    zk.ensure_path(chroot)
    yield zk_server.connect + chroot
    try:
        zk.delete(chroot, recursive=True)
    except Exception:
        pass
    zkutil.close(zk)
    if _failed(request) and zk_server.log_path:
        print("----- ZooKeeper log tail -----\n" + zk_server.log_tail(30))


@pytest.fixture
def zk(zk_hosts):
    client = zkutil.connect(zk_hosts)
    yield client
    zkutil.close(client)


@pytest.fixture
def local_cluster(zk_hosts, tmp_path, request):
    """Start brokers with ``local_cluster.add_broker(...)``; all are stopped after."""
    c = LocalCluster(zk_hosts, "TestCluster", str(tmp_path))
    yield c
    c.stop_all()
    if _failed(request):
        print("----- broker logs -----\n" + c.logs())


@pytest.fixture
def small_store():
    """Broker settings with small segments, so tests roll files quickly."""
    return {"segment_size_bytes": 1 << 20, "max_message_bytes": 64 << 10,
            "cq_entries_per_segment": 1000, "max_pull_bytes": 1 << 20}


@pytest.fixture
def c_loops():
    """format/_native.c's module. A build without it fails the test, unless
    DUOMQ_NATIVE=0 says to go without (then the test is skipped)."""
    from duomq.format import native
    if native.LOOPS is None:
        if os.environ.get("DUOMQ_NATIVE") == "0":
            pytest.skip("DUOMQ_NATIVE=0: no C loops")
        pytest.fail("duomq.format._native is not built: `pip install -e .` needs a C compiler")
    return native.LOOPS


@pytest.fixture(params=["C loops", "numpy"])
def hot_loops(request, monkeypatch):
    """Runs a test twice: with format/_native.c's loops and with the pure
    paths they stand in for (``format/native.py``)."""
    from duomq.format import native
    if request.param == "numpy":
        monkeypatch.setattr(native, "LOOPS", None)
    else:
        request.getfixturevalue("c_loops")
    return request.param


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole run (start-up costs 5-9 s),
    with the duomq data source registered."""
    from duomq.client.spark import local_session
    session = local_session("duomq-tests")
    yield session
    session.stop()


@pytest.fixture
def prometheus(request):
    """Start a real Prometheus scraping the given ``host:port`` targets (and
    evaluating duomq's alert rules) every second: ``prometheus(targets)``.
    Stopped after the test; its log is printed when the test failed."""
    from duomq.testing.prometheus import PrometheusServer
    servers = []

    def start(targets: list[str], **kwargs) -> PrometheusServer:
        server = PrometheusServer(targets, **kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        if _failed(request):
            print("----- prometheus log -----\n" + server.log_tail())
        server.stop()


@pytest.fixture
def secured(local_cluster, tmp_path, monkeypatch):
    """A secured broker pair (auth = true) with the keys `duomq auth init`
    wrote, and topic Secret: (cluster, keys dir, the admin's credentials,
    master, slave). ``$DUOMQ_CREDENTIALS`` names the admin's for the test."""
    keys = tmp_path / "keys"
    run_cli("auth", "init", "--out", str(keys))
    admin = str(keys / "admin.json")
    monkeypatch.setenv("DUOMQ_CREDENTIALS", admin)     # the harness's own ZooKeeper and clients
    master = local_cluster.add_broker("broker-a", 0, auth=True, auth_dir=str(keys))
    slave = local_cluster.add_broker("broker-a", 1, auth=True, auth_dir=str(keys))
    local_cluster.create_topic("Secret", 2)
    return local_cluster, keys, admin, master, slave


@pytest.fixture
def netfilter():
    """iptables faults on this host (root), every rule removed after the test;
    skips where they cannot be set."""
    if not Netfilter.available():
        pytest.skip("network faults need root and iptables")
    net = Netfilter(f"duomq-test-{uuid.uuid4().hex[:8]}")
    yield net
    net.heal()
