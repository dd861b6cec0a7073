"""TLS to ZooKeeper: the cluster's own CA and the ensemble's certificate,
made by ``duomq auth init`` (the ``cryptography`` library; nothing here
speaks TLS: kazoo and ZooKeeper's Netty do).

  auth_dir/zookeeper-ca.pem       the CA's certificate: every client and
                                  broker verifies the ensemble with it (it
                                  is also in each credentials file)
  auth_dir/zookeeper-server.pem   the servers' key and certificate (PEM),
                                  signed by the CA, for ZooKeeper's
                                  ``ssl.keyStore.location`` (type PEM), and
                                  for the quorum's mutual TLS
                                  (``ssl.quorum.keyStore.location``)

Clients check that the certificate names the host they connect to (kazoo's
``check_hostname``): ``--zookeeper-host`` lists every name and address
clients use.

The CA's key is not kept: a certificate for more hosts is a new
``init --zookeeper-host``. ZooKeeper's secure client port then is the only
port a client may use; the digest logins cross the network encrypted.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import stat
import tempfile

ZK_CA = "zookeeper-ca.pem"
ZK_SERVER = "zookeeper-server.pem"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
VALID_DAYS = 3650


def _name(common: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(hosts):
    from cryptography import x509
    out: list[x509.GeneralName] = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(out)


def make_tls(hosts=DEFAULT_HOSTS, cluster: str = "duomq") -> tuple[str, str]:
    """(CA certificate PEM, server key + certificate PEM) for an ensemble
    reached by ``hosts`` (names, wildcards such as ``*.zookeeper.ns.svc``,
    or IP addresses)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"duomq {cluster} ZooKeeper CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(f"duomq {cluster} ZooKeeper"))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_san(hosts), critical=False)
            # the servers also present it to each other (the quorum's mutual TLS)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                  x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    server = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption()).decode() + \
        cert.public_bytes(pem).decode()
    return ca.public_bytes(pem).decode(), server


def write_tls(directory: str, hosts=DEFAULT_HOSTS, cluster: str = "duomq") -> None:
    ca, server = make_tls(hosts, cluster)
    with open(os.path.join(directory, ZK_CA), "w") as f:
        f.write(ca)
    fd = os.open(os.path.join(directory, ZK_SERVER), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(server)


def load_ca(directory: str) -> str | None:
    """The CA certificate of ``auth_dir`` (None: the cluster has no TLS)."""
    path = os.path.join(directory, ZK_CA)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def ca_file(pem: str) -> str:
    """A file holding ``pem`` (kazoo loads its CA from a path, at every
    connection): one per CA and user, named by the CA's hash, in the temp
    directory, written whole, then renamed. A file found at that name is
    used only when it is this user's own regular file, written by nobody
    else, holding exactly ``pem``: in a temp directory other users share,
    one of them could have put their own CA there first (the name is
    derived from a public certificate), and the client would then trust
    their ZooKeeper. Otherwise the CA goes to a file of a name nobody could
    foresee."""
    digest = hashlib.sha256(pem.encode()).hexdigest()[:24]
    tmpdir = tempfile.gettempdir()
    path = os.path.join(tmpdir, f"duomq-zookeeper-ca-{os.getuid()}-{digest}.pem")
    for known in (path, _PRIVATE.get(path)):
        if known and _own_copy(known, pem):
            return known
    fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix=".duomq-ca-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(pem)
    os.chmod(tmp, 0o644)
    try:
        os.replace(tmp, path)       # a file of another user's in a sticky /tmp: refused
    except OSError:
        _PRIVATE[path] = tmp        # ours, under a name nobody chose for us
        return tmp
    return path


_PRIVATE: dict[str, str] = {}       # the name a CA should have had -> the file it has


def _own_copy(path: str, pem: str) -> bool:
    """Whether ``path`` is this user's regular file (no link), writable by
    it alone, holding ``pem``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return False
        data = pem.encode()
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)
