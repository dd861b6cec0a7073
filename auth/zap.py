"""ZAP for a broker's two ports, through pyzmq's ``zmq.auth``: the client
port admits the cluster's broker key and every registered user's key; the
replication port admits only the broker key (a client cannot pose as a
slave). The broker keys are the cluster's keypair, and during a rotation
the next or the previous one too. ZeroMQ's CURVE handshake does the cryptography; this only answers
who may connect, and names them (the ``User-Id`` of their messages)."""

from __future__ import annotations

import logging

from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from duomq.auth.domains import BROKER_USER, CLIENT_DOMAIN, HA_DOMAIN
from duomq.auth.users import UserRegistry

log = logging.getLogger(__name__)
# a broker opens its ports before it has read its users from ZooKeeper (a
# port taken fails before it changes anything there): a user's handshake
# meanwhile waits this long for them (ZooKeeper's connect timeout, 10 s,
# with room for the reads), not refused as an unknown key
USERS_WAIT_S = 20.0


class _Keys:
    """A ZAP credentials provider: whether a Z85 key may connect."""

    def __init__(self, broker_keys: tuple[bytes, ...], users: UserRegistry | None):
        self.broker_keys = broker_keys
        self.users = users

    def callback(self, domain: str, key: bytes) -> bool:
        users = self.users
        if key in self.broker_keys:
            return True
        if users is not None and not users.read.is_set():
            log.info("a client's handshake waits until the users are read from ZooKeeper")
            if not users.read.wait(USERS_WAIT_S):
                log.warning("refused a connection on the client port: the users were not "
                            "read from ZooKeeper within %.0f s", USERS_WAIT_S)
                return False
        ok = users is not None and key in users.by_key
        if not ok:
            log.warning("refused a connection on the %s port: unknown key %s",
                        "client" if self.users is not None else "replication", key.decode())
        return ok


class BrokerAuthenticator(ThreadAuthenticator):
    """The ZAP handler thread of one broker's ZeroMQ context."""

    def __init__(self, context, broker_keys: tuple[bytes, ...], users: UserRegistry):
        super().__init__(context, log=logging.getLogger("duomq.auth.zap.handler"))
        self.broker_keys = broker_keys
        self.users = users

    def start(self) -> None:
        super().start()
        self.configure_curve_callback(CLIENT_DOMAIN, _Keys(self.broker_keys, self.users))
        self.configure_curve_callback(HA_DOMAIN, _Keys(self.broker_keys, None))

    def curve_user_id(self, client_public_key: bytes) -> str:
        """``"<user> <Z85 key>"``: the request loop checks both on every request."""
        key = z85.encode(client_public_key)
        user = self.users.by_key.get(key)
        name = BROKER_USER if key in self.broker_keys else user.name if user else "anonymous"
        return f"{name} {key.decode()}"
