"""Which client socket a RemotingClient uses (client/remoting.py): its own
ZMTP sockets or libzmq's, from ``transport`` and ``$DUOMQ_TRANSPORT``; every
client reads the variable (producers and consumers, the CLI's status and
health probes, the Spark reader), and a secured client keeps libzmq's CURVE."""

import threading

import pytest
import zmq

from duomq.auth.credentials import Credentials
from duomq.client.remoting import RemotingClient
from duomq.common.curve import KeyPair
from duomq.common.errors import ConfigError
from duomq.proto import codec, pb
from duomq.transport.dealer import ZmtpDealer


def creds() -> Credentials:
    return Credentials("alice", KeyPair.new(), KeyPair.new().public)


@pytest.mark.parametrize("env, secured, native", [
    ("", False, True), ("auto", False, True), ("native", False, True),
    ("zeromq", False, False), ("ZeroMQ ", False, False),
    ("", True, False), ("native", True, False), ("zeromq", True, False)])
def test_auto_reads_the_environment(monkeypatch, env, secured, native):
    monkeypatch.setenv("DUOMQ_TRANSPORT", env)
    r = RemotingClient("choice", credentials=creds() if secured else None)
    try:
        assert r.native is native
    finally:
        r.close()


@pytest.mark.parametrize("transport, native", [("native", True), ("zeromq", False)])
def test_an_explicit_transport_wins_over_the_environment(monkeypatch, transport, native):
    monkeypatch.setenv("DUOMQ_TRANSPORT", "zeromq" if native else "native")
    r = RemotingClient("choice", transport=transport)
    try:
        assert r.native is native
    finally:
        r.close()


def test_a_bad_value_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("DUOMQ_TRANSPORT", "tcp")
    with pytest.raises(ConfigError, match=r"\$DUOMQ_TRANSPORT 'tcp'"):
        RemotingClient("choice")
    monkeypatch.delenv("DUOMQ_TRANSPORT")
    with pytest.raises(ConfigError, match="native with credentials"):
        RemotingClient("choice", credentials=creds(), transport="native")


@pytest.mark.parametrize("env", ["native", "zeromq"])
def test_the_blocking_call_uses_the_chosen_socket(monkeypatch, env):
    """A call through each kind of socket to a libzmq ROUTER (a broker's port
    in a secured cluster, or with client_transport = "zeromq") is answered."""
    monkeypatch.setenv("DUOMQ_TRANSPORT", env)
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    r = RemotingClient("choice")
    try:
        def answer():
            if router.poll(5000):
                who, data = router.recv_multipart()
                frame = codec.decode_frame(data)
                router.send_multipart([who, codec.encode_response(
                    frame.request_id, pb.BROKER_STATUS, pb.OK, "", None)])
        t = threading.Thread(target=answer)
        t.start()
        status, _error, _ = r.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
        t.join(5)
        assert status == pb.OK
        sock = r._local.socks[address].sock
        assert isinstance(sock, ZmtpDealer) is (env == "native")
    finally:
        r.close()
        router.close(0)
