"""The ZAP handler's answer for a key (``auth.zap._Keys``): a broker key at
once; a user's key only once the users are read (a starting broker opens
its ports first), then by whether it is registered."""

import threading
import time

from duomq.auth.acl import ADMIN
from duomq.auth.user import User
from duomq.auth.users import UserRegistry
from duomq.auth.zap import _Keys
from duomq.common.curve import KeyPair


def test_a_users_key_waits_for_the_users_and_a_broker_key_does_not():
    broker, alice, stranger = KeyPair.new(), KeyPair.new(), KeyPair.new()
    users = UserRegistry("c")
    keys = _Keys((broker.public,), users)
    assert keys.callback("duomq-client", broker.public)          # not read yet: no wait
    answers = {}
    waiting = [threading.Thread(target=lambda k=k: answers.__setitem__(k, keys.callback("d", k)))
               for k in (alice.public, stranger.public)]
    for t in waiting:
        t.start()
    time.sleep(0.3)
    assert not answers and all(t.is_alive() for t in waiting)   # held, not refused
    users._users["alice"] = User("alice", alice.public, ADMIN)
    users._publish()
    users.read.set()
    for t in waiting:
        t.join(5)
    assert answers == {alice.public: True, stranger.public: False}


def test_the_replication_ports_keys_never_wait_for_users():
    broker, other = KeyPair.new(), KeyPair.new()
    keys = _Keys((broker.public,), None)
    t0 = time.monotonic()
    assert keys.callback("duomq-ha", broker.public) and not keys.callback("duomq-ha", other.public)
    assert time.monotonic() - t0 < 0.1
