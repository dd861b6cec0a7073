"""How duomq logs in to ZooKeeper: the digest principals (``duomq`` for
brokers and admins, each user its own), the cluster's digest secret and its
rotation's files in ``auth_dir``, SASL logins, and the access a client's
credentials file carries. Below ``auth`` (the connection, ``coordinator.zk``,
uses it); ``auth.credentials`` keeps the files that hold them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets

from duomq.common.errors import ConfigError
from duomq.common.zk_tls import load_ca

CREDENTIALS_ENV = "DUOMQ_CREDENTIALS"


ZK_SECRET = "zookeeper.secret"     # in auth_dir: the password of ZooKeeper principal "duomq"


ZK_ADMIN = "duomq"                 # ZooKeeper digest principal of brokers and admins; each
                                   # user logs in as itself (``user_zk_login``)


                                   # user logs in as itself (``user_zk_login``)
ZK_CLIENT = "client"               # the principal all users shared before 0.2 (retired)


ZK_SASL = "zookeeper.sasl"         # in auth_dir: the brokers' SASL login to the ensemble


SASL_FILE_ENV = "DUOMQ_ZOOKEEPER_SASL_FILE"   # a file holding a SASL login (user:password)


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


def checked_access(zk, where: str, user: str) -> dict:
    """A credentials file's ``zookeeper`` field, checked: ``{"digest":
    "user:password"}``, maybe with ``sasl`` and ``tls_ca``; a ConfigError
    says what is wrong (``where``: the file, of ``user``)."""
    if not (isinstance(zk, dict) and isinstance(zk.get("digest"), str) and ":" in zk["digest"]):
        raise ConfigError(f"{where}: zookeeper is not {{\"digest\": \"user:password\"}}")
    if zk["digest"].split(":", 1)[0] == ZK_CLIENT:
        raise ConfigError(f"{where}: they log in to ZooKeeper as the shared principal "
                          f"'client', which this release no longer accepts: an admin gives "
                          f"user {user!r} its own login with `duomq auth user update {user} "
                          f"--rotate --out FILE`")
    if "sasl" in zk:
        sasl_login(zk["sasl"], f"{where}: zookeeper.sasl")
    if "tls_ca" in zk and not (isinstance(zk["tls_ca"], str)
                               and "BEGIN CERTIFICATE" in zk["tls_ca"]):
        raise ConfigError(f"{where}: zookeeper.tls_ca is not a PEM certificate")
    return zk


def env_zk_access() -> dict | None:
    """The ZooKeeper access of ``$DUOMQ_CREDENTIALS``'s file, if it has one
    (tools and the CLI reach ZooKeeper as that user); a bad file: None (the
    client that loads it says why)."""
    path = os.environ.get(CREDENTIALS_ENV)
    if not path:
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
        zk = doc.get("zookeeper") if isinstance(doc, dict) else None
        return None if zk is None else checked_access(zk, f"credentials {path}",
                                                      str(doc.get("user", "")))
    except (OSError, ValueError, ConfigError):
        return None
