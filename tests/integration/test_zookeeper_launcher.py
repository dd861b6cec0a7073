"""The ZooKeeper launcher's sources: Debian's jars, the jars inside pyspark,
an external server, and the Docker probe."""

import os
import socket
import threading

import pytest

from duomq.coordinator import zk as zkutil
from duomq.dev import zookeeper as zkl

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("source", ["debian", "pyspark"])
def test_local_server_from_each_jar_source(source):
    cp = zkl.debian_classpath() if source == "debian" else zkl.pyspark_classpath()
    assert cp, f"{source} ZooKeeper jars are missing (make install provides both)"
    handle = zkl.start_local(cp=cp)
    port = int(handle.connect.rsplit(":", 1)[1])
    try:
        assert "Mode: standalone" in zkl.four_letter("127.0.0.1", port)
        zk = zkutil.connect(handle.connect)
        zk.create("/probe", b"x")
        assert zk.get("/probe")[0] == b"x"
        zkutil.close(zk)
    finally:
        handle.stop()
    with pytest.raises(OSError):
        zkl.four_letter("127.0.0.1", port, timeout=0.5)
    assert not os.path.exists(handle.data_dir)       # a fresh dir, removed after


def test_external_server_is_used_as_given(zk_server):
    h = zkl.launch(zk_server.connect)
    assert (h.kind, h.connect, h.pid) == ("external", zk_server.connect, None)
    h.stop()                                         # never stops someone else's server
    host, port = zk_server.connect.rsplit(":", 1)
    assert "Mode:" in zkl.four_letter(host, int(port))


def fake_engine(path, reply):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(reply)
        srv.close()

    threading.Thread(target=serve, daemon=True).start()


def test_docker_probe(tmp_path, monkeypatch):
    sock = str(tmp_path / "docker.sock")
    fake_engine(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
    monkeypatch.setenv("DOCKER_HOST", "unix://" + sock)
    assert zkl.docker_available()
    monkeypatch.setenv("DOCKER_HOST", "unix://" + str(tmp_path / "absent.sock"))
    assert not zkl.docker_available()
    sock2 = str(tmp_path / "broken.sock")
    fake_engine(sock2, b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    monkeypatch.setenv("DOCKER_HOST", "unix://" + sock2)
    assert not zkl.docker_available()
