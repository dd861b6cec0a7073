"""CURVE keys on disk: the cluster's broker keypair and a user's credentials
file.

  broker keypair   ``DIR/broker.key`` and ``DIR/broker.key_secret``, written
                   by ``zmq.auth.create_certificates`` (ZeroMQ's own
                   certificate format); every broker of the cluster holds it
  credentials      one JSON file per user: its name, its keypair, and the
                   brokers' public key (so a client checks it talks to the
                   cluster's brokers); written readable by its owner only

Keys are Z85 text (40 characters), as ZeroMQ prints them. Nothing here
does crypto: ZeroMQ's CURVE does, with these keys.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass

import zmq
import zmq.auth

from duomq.common.errors import ConfigError, InvalidNameError
from duomq.common.names import validate_name
from duomq.common.zk_tls import DEFAULT_HOSTS, load_ca, write_tls

BROKER_CERT = "broker"
CREDENTIALS_ENV = "DUOMQ_CREDENTIALS"
ZK_SECRET = "zookeeper.secret"     # in auth_dir: the password of ZooKeeper principal "duomq"
ZK_ADMIN = "duomq"                 # ZooKeeper digest principal of brokers and admins; each
                                   # user logs in as itself (``user_zk_login``)
ZK_CLIENT = "client"               # the principal all users shared before 0.2 (retired)
ZK_SASL = "zookeeper.sasl"         # in auth_dir: the brokers' SASL login to the ensemble
SASL_FILE_ENV = "DUOMQ_ZOOKEEPER_SASL_FILE"   # a file holding a SASL login (user:password)


@dataclass(frozen=True)
class KeyPair:
    public: bytes           # Z85
    secret: bytes           # Z85

    @classmethod
    def new(cls) -> KeyPair:
        public, secret = zmq.curve_keypair()
        return cls(public, secret)


def z85_key(value, what: str, where: str) -> bytes:
    key = value.encode() if isinstance(value, str) else value
    if not isinstance(key, bytes) or len(key) != 40:
        raise ConfigError(f"{where}: {what} is not a 40-character Z85 CURVE key")
    try:
        zmq.utils.z85.decode(key)
    except (ValueError, KeyError):
        raise ConfigError(f"{where}: {what} is not a Z85 CURVE key") from None
    return key


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


def client_zk_password(secret: str) -> str:
    """The ZooKeeper password of the retired principal ``client``, derived
    from the cluster's secret (the nodes it made are recognised by it)."""
    return base64.urlsafe_b64encode(
        hmac.new(secret.encode(), b"duomq-zookeeper-client", hashlib.sha256).digest()
    ).decode().rstrip("=")


def digest_id(user: str, password: str) -> str:
    """ZooKeeper's digest id of ``user:password`` (``user:base64(sha1)``)."""
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(raw).decode()}"


def sasl_login(value, where: str) -> str:
    """A ZooKeeper SASL (DIGEST-MD5) login, ``user:password``, checked."""
    user, sep, password = value.strip().partition(":") if isinstance(value, str) else ("", "", "")
    if not (sep and user and password) or any(c.isspace() for c in user):
        raise ConfigError(f"{where}: a ZooKeeper SASL login is 'user:password'")
    return f"{user}:{password}"


def load_zk_sasl(path: str) -> str:
    """The SASL login in the file ``path`` (``zookeeper_sasl_file``,
    ``$DUOMQ_ZOOKEEPER_SASL_FILE``, ``auth_dir/zookeeper.sasl``)."""
    try:
        with open(path) as f:
            return sasl_login(f.read(), path)
    except OSError as exc:
        raise ConfigError(f"cannot read the ZooKeeper SASL login {path}: "
                          f"{exc.strerror or exc}") from None


def broker_zk_sasl(sasl_file: str, auth_dir: str) -> str | None:
    """A broker's SASL login to ZooKeeper: its ``zookeeper_sasl_file``, else
    ``auth_dir/zookeeper.sasl`` when that exists (``duomq auth init
    --zookeeper-sasl``), else none."""
    if sasl_file:
        return load_zk_sasl(sasl_file)
    if auth_dir and os.path.exists(os.path.join(auth_dir, ZK_SASL)):
        return load_zk_sasl(os.path.join(auth_dir, ZK_SASL))
    return None


def broker_zk_login(auth: bool, auth_dir: str, sasl_file: str) -> tuple[dict | None, str | None]:
    """How a broker (and a tool run in its pod with its config) reaches
    ZooKeeper: its digest access (auth = true: the ``duomq`` principal of
    ``auth_dir``) and its SASL login. A ConfigError names a bad file."""
    access = zk_access_for_admin(load_zk_secret(auth_dir), load_ca(auth_dir)) if auth else None
    return access, broker_zk_sasl(sasl_file, auth_dir if auth else "")


def env_zk_sasl() -> str | None:
    """The SASL login of ``$DUOMQ_ZOOKEEPER_SASL_FILE``'s file, if set."""
    path = os.environ.get(SASL_FILE_ENV)
    return load_zk_sasl(path) if path else None


ZK_SECRET_NEXT, ZK_SECRET_PREVIOUS = f"{ZK_SECRET}.next", f"{ZK_SECRET}.previous"


def rotate_zk_secret_files(directory: str, step: str) -> tuple[str, str]:
    """The files of one step of a rotation of the cluster's ZooKeeper secret
    in ``auth_dir`` (``duomq auth rotate``, which also tells ZooKeeper);
    returns (the secret the step's ZooKeeper work logs in with, the other
    one: the next secret for ``new``, the previous for ``retire``).

    ``new``      a next secret, ``zookeeper.secret.next``
    ``promote``  the next secret becomes ``zookeeper.secret``; the old one
                 stays as ``zookeeper.secret.previous``
    ``retire``   nothing yet: the caller deletes ``zookeeper.secret.previous``
                 once ZooKeeper forgot it
    """
    path = lambda name: os.path.join(directory, name)        # noqa: E731
    current = load_zk_secret(directory)
    if step == "new":
        if os.path.exists(path(ZK_SECRET_NEXT)):
            raise ConfigError(f"{path(ZK_SECRET_NEXT)} exists: a rotation is under way "
                              f"(promote it, or delete that file)")
        if os.path.exists(path(ZK_SECRET_PREVIOUS)):
            raise ConfigError(f"{path(ZK_SECRET_PREVIOUS)} exists: retire the previous "
                              f"rotation first")
        nxt = secrets.token_urlsafe(32)
        fd = os.open(path(ZK_SECRET_NEXT), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(nxt + "\n")
        return current, nxt
    if step == "promote":
        if not os.path.exists(path(ZK_SECRET_NEXT)):
            raise ConfigError(f"no {path(ZK_SECRET_NEXT)}: run `duomq auth rotate new` first")
        nxt = load_zk_secret_file(path(ZK_SECRET_NEXT))
        os.replace(path(ZK_SECRET), path(ZK_SECRET_PREVIOUS))
        os.replace(path(ZK_SECRET_NEXT), path(ZK_SECRET))
        return nxt, current
    if step == "retire":
        if not os.path.exists(path(ZK_SECRET_PREVIOUS)):
            raise ConfigError(f"no {path(ZK_SECRET_PREVIOUS)}: nothing to retire")
        return current, load_zk_secret_file(path(ZK_SECRET_PREVIOUS))
    raise ValueError(f"unknown rotation step {step!r}")


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


def load_zk_secret_file(path: str) -> str:
    with open(path) as f:
        secret = f.read().strip()
    if not secret:
        raise ConfigError(f"auth_dir: {path} is empty")
    return secret


def load_zk_secret(directory: str) -> str:
    path = os.path.join(directory, ZK_SECRET)
    try:
        with open(path) as f:
            secret = f.read().strip()
    except OSError as exc:
        raise ConfigError(f"auth_dir: cannot read {path}: {exc.strerror or exc} (duomq auth "
                          f"init writes it)") from None
    if not secret:
        raise ConfigError(f"auth_dir: {path} is empty")
    return secret


def zk_access_for_admin(secret: str, tls_ca: str | None = None) -> dict:
    """The ``duomq`` principal's access (``tls_ca``: the ensemble's CA, PEM,
    when it speaks only TLS)."""
    return {"digest": f"{ZK_ADMIN}:{secret}", **({"tls_ca": tls_ca} if tls_ca else {})}


def admin_ids(access: dict) -> tuple[str, ...]:
    """The digest ids of the ``duomq`` principal an admin access logs in
    as (its own; the next one too during a secret rotation)."""
    user, password = access["digest"].split(":", 1)
    return (digest_id(user, password),)


def retired_ids(access: dict) -> tuple[str, ...]:
    """The digest id of the shared ``client`` principal of earlier releases,
    derived from an admin access's secret."""
    return (digest_id(ZK_CLIENT, client_zk_password(access["digest"].split(":", 1)[1])),)


def user_zk_login(name: str) -> dict:
    """A new ZooKeeper login of user ``name``: its own digest principal with
    a random password (the user's node keeps only its digest id)."""
    return {"digest": f"{name}:{secrets.token_urlsafe(32)}"}


def is_admin(access: dict | None) -> bool:
    return access is not None and access["digest"].split(":", 1)[0] == ZK_ADMIN


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
            if not (isinstance(zk, dict) and isinstance(zk.get("digest"), str)
                    and ":" in zk["digest"]):
                raise ConfigError(f"credentials {path}: zookeeper is not {{\"digest\": "
                                  f"\"user:password\"}}")
            if zk["digest"].split(":", 1)[0] == ZK_CLIENT:
                raise ConfigError(f"credentials {path}: they log in to ZooKeeper as the "
                                  f"shared principal 'client', which this release no longer "
                                  f"accepts: an admin gives user {user!r} its own login with "
                                  f"`duomq auth user update {user} --rotate --out FILE`")
            if "sasl" in zk:
                sasl_login(zk["sasl"], f"credentials {path}: zookeeper.sasl")
            if "tls_ca" in zk and not (isinstance(zk["tls_ca"], str)
                                       and "BEGIN CERTIFICATE" in zk["tls_ca"]):
                raise ConfigError(f"credentials {path}: zookeeper.tls_ca is not a PEM "
                                  f"certificate")
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


def env_zk_access() -> dict | None:
    """The ZooKeeper access of ``$DUOMQ_CREDENTIALS``'s file, if it has one
    (tools and the CLI reach ZooKeeper as that user); a bad file: None (the
    client that loads it says why)."""
    path = os.environ.get(CREDENTIALS_ENV)
    if not path:
        return None
    try:
        return Credentials.load(path).zookeeper
    except ConfigError:
        return None
