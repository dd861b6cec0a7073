"""CURVE keys and credentials on disk: the cluster's broker keypair (and a
rotation's), the admin's public key, the metrics token and a user's
credentials file.

  broker keypair   ``DIR/broker.key`` and ``DIR/broker.key_secret``, written
                   by ``zmq.auth.create_certificates`` (ZeroMQ's own
                   certificate format); every broker of the cluster holds it
  credentials      one JSON file per user: its name, its keypair, and the
                   brokers' public key (so a client checks it talks to the
                   cluster's brokers); written readable by its owner only

Keys are Z85 text (``common.curve``); the ZooKeeper logins they carry are
``coordinator.zk_login``'s.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass

import zmq
import zmq.auth

from duomq.common.curve import KeyPair, z85_key
from duomq.common.errors import ConfigError, InvalidNameError
from duomq.common.names import validate_name
from duomq.common.zk_tls import DEFAULT_HOSTS, load_ca, write_tls
from duomq.coordinator.zk_login import (
    CREDENTIALS_ENV,
    ZK_SASL,
    ZK_SECRET,
    checked_access,
    sasl_login,
    zk_access_for_admin,
)

__all__ = ["CREDENTIALS_ENV", "Credentials", "KeyPair"]

BROKER_CERT = "broker"


def write_broker_keys(directory: str) -> KeyPair:
    """A new broker keypair in ``directory`` (refused if one is there)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{BROKER_CERT}.key_secret")
    if os.path.exists(path):
        raise ConfigError(f"{path} exists: the cluster already has a broker keypair")
    zmq.auth.create_certificates(directory, BROKER_CERT)
    os.chmod(path, 0o600)
    return load_broker_keys(directory)


NEXT_CERT, PREVIOUS_CERT = "broker-next", "broker-previous"   # a broker key rotation's


def load_broker_trust(directory: str) -> tuple[bytes, ...]:
    """Every broker public key a broker of ``auth_dir`` accepts, its own
    first: during a rotation also ``broker-next.key`` (brought in by
    ``duomq auth broker-key new``) or ``broker-previous.key`` (kept by
    ``promote`` until ``retire``)."""
    keys = [load_broker_keys(directory).public]
    for name in (NEXT_CERT, PREVIOUS_CERT):
        path = os.path.join(directory, f"{name}.key")
        if not os.path.exists(path):
            continue
        try:
            public, _ = zmq.auth.load_certificate(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"auth_dir: cannot read {path}: {exc}") from None
        key = z85_key(public, "the public key", path)
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def rotate_broker_keys(directory: str, step: str) -> str:
    """One step of a broker keypair rotation in ``auth_dir`` (the brokers
    read it when they start, so each step is followed by a rolling
    restart); returns what was done.

    ``new``      a new keypair as ``broker-next``: brokers accept it besides
                 their own, and clients may be given it to trust
    ``promote``  ``broker-next`` becomes ``broker``; the old public key
                 stays as ``broker-previous`` (still accepted), its secret
                 is deleted
    ``retire``   ``broker-previous`` deleted: the old key is accepted no more
    """
    def path(name: str, secret: bool = False) -> str:
        return os.path.join(directory, f"{name}.key" + ("_secret" if secret else ""))
    load_broker_keys(directory)             # the directory holds a cluster's keys
    if step == "new":
        if os.path.exists(path(NEXT_CERT, True)):
            raise ConfigError(f"{path(NEXT_CERT, True)} exists: a rotation is under way "
                              f"(promote it, or delete both broker-next files)")
        if os.path.exists(path(PREVIOUS_CERT)):
            raise ConfigError(f"{path(PREVIOUS_CERT)} exists: retire the previous rotation "
                              f"first")
        zmq.auth.create_certificates(directory, NEXT_CERT)
        os.chmod(path(NEXT_CERT, True), 0o600)
        return f"wrote the next broker keypair ({NEXT_CERT}.key, {NEXT_CERT}.key_secret)"
    if step == "promote":
        if not os.path.exists(path(NEXT_CERT, True)):
            raise ConfigError(f"no {path(NEXT_CERT, True)}: run `duomq auth broker-key new` "
                              f"first")
        os.replace(path(BROKER_CERT), path(PREVIOUS_CERT))
        os.replace(path(NEXT_CERT), path(BROKER_CERT))
        os.replace(path(NEXT_CERT, True), path(BROKER_CERT, True))
        return f"{NEXT_CERT} is now the broker keypair; the old public key is {PREVIOUS_CERT}.key"
    if step == "retire":
        if not os.path.exists(path(PREVIOUS_CERT)):
            raise ConfigError(f"no {path(PREVIOUS_CERT)}: nothing to retire")
        os.remove(path(PREVIOUS_CERT))
        return f"deleted {PREVIOUS_CERT}.key: the old broker key is accepted no more"
    raise ValueError(f"unknown rotation step {step!r}")


def load_broker_keys(directory: str) -> KeyPair:
    """The broker keypair from ``directory`` (``auth_dir``)."""
    path = os.path.join(directory, f"{BROKER_CERT}.key_secret")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except OSError as exc:
        raise ConfigError(f"auth_dir: cannot read the broker keypair {path}: "
                          f"{exc.strerror or exc} (duomq auth init writes it)") from None
    except ValueError as exc:
        raise ConfigError(f"auth_dir: {path} is not a ZeroMQ certificate: {exc}") from None
    if not secret:
        raise ConfigError(f"auth_dir: {path} holds no secret key")
    return KeyPair(z85_key(public, "the public key", path), z85_key(secret, "the secret key", path))


ADMIN_KEY = "admin-user.key"      # in auth_dir: the admin's name and public key


def write_admin_key(directory: str, user: str, public: bytes) -> None:
    """The admin user's name and public key, for the brokers to register."""
    with open(os.path.join(directory, ADMIN_KEY), "w") as f:
        f.write(f"#   duomq's admin user: its public key, registered by the brokers\n"
                f"metadata\n    user = \"{user}\"\ncurve\n"
                f"    public-key = \"{public.decode()}\"\n")


def load_admin_key(directory: str) -> tuple[str, bytes] | None:
    """(name, public key) of the admin from ``auth_dir``; None: none there."""
    path = os.path.join(directory, ADMIN_KEY)
    if not os.path.exists(path):
        return None
    try:
        public, _ = zmq.auth.load_certificate(path)
        with open(path) as f:
            text = f.read()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"auth_dir: {path}: {exc}") from None
    name = next((line.split("=", 1)[1].strip().strip('"') for line in text.splitlines()
                 if line.strip().startswith("user")), "admin")
    return name, z85_key(public, "public-key", path)


METRICS_TOKEN = "metrics.token"     # in auth_dir: the bearer token a scrape of /metrics carries


def write_metrics_token(directory: str) -> tuple[str, bool]:
    """``directory/metrics.token``, written (random, 0600) when missing:
    (its path, whether it was written now)."""
    path = os.path.join(directory, METRICS_TOKEN)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path, False
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")
    return path, True


def load_metrics_token(directory: str) -> str | None:
    """The bearer token of ``/metrics`` (None: ``auth_dir`` has none)."""
    try:
        with open(os.path.join(directory, METRICS_TOKEN)) as f:
            token = f.read().strip()
    except FileNotFoundError:
        return None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"{os.path.join(directory, METRICS_TOKEN)}: not a token (one line "
                          f"of printable characters)")
    return token


@dataclass(frozen=True)
class Credentials:
    user: str
    keys: KeyPair
    broker_public_key: bytes        # Z85: the brokers a client may talk to
    zookeeper: dict | None = None   # ZooKeeper access: {"digest": "user:password", and the
                                    # other principal's digest id for the nodes it creates}
    trusted_broker_keys: tuple[bytes, ...] = ()   # more brokers' keys (during a rotation)

    @property
    def broker_keys(self) -> tuple[bytes, ...]:
        """Every broker key these credentials trust, the main one first."""
        return (self.broker_public_key,
                *(k for k in self.trusted_broker_keys if k != self.broker_public_key))

    def to_json(self) -> str:
        more = [k.decode() for k in self.broker_keys[1:]]
        return json.dumps({"user": self.user, "public_key": self.keys.public.decode(),
                           "secret_key": self.keys.secret.decode(),
                           "broker_public_key": self.broker_public_key.decode(),
                           **({"trusted_broker_keys": more} if more else {}),
                           **({"zookeeper": self.zookeeper} if self.zookeeper else {})},
                          indent=2)

    def write(self, path: str) -> None:
        """Readable by its owner only; an existing file is replaced atomically."""
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.to_json() + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> Credentials:
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as exc:
            raise ConfigError(f"credentials {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"credentials {path}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"credentials {path}: expected a JSON object")
        missing = sorted({"user", "public_key", "secret_key", "broker_public_key"} - set(doc))
        if missing:
            raise ConfigError(f"credentials {path}: missing {', '.join(missing)}")
        user = str(doc["user"])
        try:
            validate_name("user", user)
        except InvalidNameError as exc:
            raise ConfigError(f"credentials {path}: {exc}") from None
        keys = KeyPair(z85_key(doc["public_key"], "public_key", path),
                       z85_key(doc["secret_key"], "secret_key", path))
        if zmq.curve_public(keys.secret) != keys.public:
            raise ConfigError(f"credentials {path}: public_key does not belong to secret_key")
        zk = doc.get("zookeeper")
        if zk is not None:
            checked_access(zk, f"credentials {path}", user)
        more = doc.get("trusted_broker_keys", [])
        if not isinstance(more, list):
            raise ConfigError(f"credentials {path}: trusted_broker_keys is not a list of keys")
        return cls(user, keys, z85_key(doc["broker_public_key"], "broker_public_key", path), zk,
                   tuple(z85_key(k, "a trusted_broker_keys entry", path) for k in more))


def resolve_credentials(value) -> Credentials | None:
    """A client's ``credentials``: a Credentials, a path, or (None) the
    ``DUOMQ_CREDENTIALS`` variable's path; None when there are none."""
    if isinstance(value, Credentials):
        return value
    path = value if value else os.environ.get(CREDENTIALS_ENV)
    return Credentials.load(os.fspath(path)) if path else None


def init_cluster_keys(directory: str, admin: str = "admin", sasl_user: str | None = None,
                      zookeeper_tls: bool = False,
                      zookeeper_hosts: tuple[str, ...] = DEFAULT_HOSTS) -> str:
    """``duomq auth init``: the broker keypair, the admin user's public key
    (for the brokers to register) and credentials, and the ZooKeeper digest
    secret, in ``directory``; with ``sasl_user``, a SASL login to the
    ensemble too (``zookeeper.sasl``, also in the admin's credentials); with
    ``zookeeper_tls``, the ensemble's TLS CA and certificate for
    ``zookeeper_hosts`` (``common.zk_tls``; the CA also in the admin's
    credentials). Returns the admin's credentials path."""
    validate_name("user", admin)
    if sasl_user is not None:
        sasl_login(f"{sasl_user}:x", "--zookeeper-sasl")
    broker = write_broker_keys(directory)
    if zookeeper_tls:
        write_tls(directory, zookeeper_hosts)
    pair = KeyPair.new()
    write_admin_key(directory, admin, pair.public)
    write_metrics_token(directory)
    secret = secrets.token_urlsafe(32)
    fd = os.open(os.path.join(directory, ZK_SECRET), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    access = zk_access_for_admin(secret, load_ca(directory))
    if sasl_user is not None:
        access["sasl"] = f"{sasl_user}:{secrets.token_urlsafe(24)}"
        fd = os.open(os.path.join(directory, ZK_SASL), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o600)
        with os.fdopen(fd, "w") as f:
            f.write(access["sasl"] + "\n")
    path = os.path.join(directory, f"{admin}.json")
    Credentials(admin, pair, broker.public, access).write(path)
    return path
