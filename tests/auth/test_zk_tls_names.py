"""A client checks that the ensemble's certificate names the host it
connects to and that the cluster's CA signed it (issue 40): a server
holding a certificate the CA signed for other names, or one for the right
name from another CA, is refused at the handshake. Real kazoo and a real
TLS listener (Python's ssl) on 127.0.0.1; the listener records whether the
client completed its handshake, which happens only when the names match."""

from __future__ import annotations

import pathlib
import socket
import ssl
import subprocess
import sys
import threading

import pytest

from duomq.common.zk_tls import make_tls

CONNECT = """
import sys
from duomq.common.errors import ServiceNotAvailableError
from duomq.coordinator import zk as zkutil
try:
    zkutil.connect(f"127.0.0.1:{sys.argv[1]}", access={"digest": "duomq:s", "tls_ca": sys.argv[2]},
                   timeout_s=1.5)
except ServiceNotAvailableError as exc:
    print(exc)
"""


def handshakes(server_pem: pathlib.Path) -> tuple[socket.socket, list[str]]:
    """A TLS listener with the key and certificate in ``server_pem``, and
    the outcome of each handshake ("ok" or the error)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(server_pem)
    sock = socket.create_server(("127.0.0.1", 0))
    outcomes: list[str] = []

    def serve() -> None:
        sock.settimeout(10)
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    outcomes.append("ok")
                    tls.recv(1)               # then it is no ZooKeeper: the client gives up
            except (ssl.SSLError, OSError) as exc:
                outcomes.append(str(exc))

    threading.Thread(target=serve, daemon=True).start()
    return sock, outcomes


@pytest.mark.parametrize("names,own_ca,completes", [
    (("127.0.0.1",), True, True),                    # the address the client uses
    (("zk.example", "10.0.0.1"), True, False),       # signed by the CA, for other hosts
    (("127.0.0.1",), False, False),                  # the right name, another CA's (a stranger's)
])
def test_the_client_checks_the_servers_name(names, own_ca, completes, tmp_path):
    ca, server = make_tls(names)
    if not own_ca:
        ca, _ = make_tls(names)                      # the client trusts a CA that did not sign it
    (tmp_path / "server.pem").write_text(server)
    listener, outcomes = handshakes(tmp_path / "server.pem")
    port = listener.getsockname()[1]
    # in a process of its own: kazoo leaves the socket of a failed handshake
    # to the garbage collector, which would warn inside this one
    with listener:
        client = subprocess.run([sys.executable, "-c", CONNECT, str(port), ca],
                                capture_output=True, text=True, timeout=60)
    assert client.returncode == 0 and "over TLS" in client.stdout, client.stdout + client.stderr
    assert outcomes, "the client never connected"
    if completes:
        assert "ok" in outcomes, outcomes
    elif own_ca:
        assert "ok" not in outcomes and all("CERTIFICATE" in o.upper() for o in outcomes), outcomes
    else:   # the CAs share a name: the signature does not verify (a decrypt-error alert)
        assert "ok" not in outcomes and all("ALERT" in o.upper() for o in outcomes), outcomes
