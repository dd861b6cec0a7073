"""``duomq health --live|--ready``: the probes of a broker's pod.

``--live``: the broker answers on its client port and its replication port
accepts connections. Never asks ZooKeeper: a ZooKeeper outage must not get
every broker restarted. ``--ready``: the broker's own judgement
(``broker.health``): a master that may take writes, or a slave that follows
its master within ``ha_max_gap_bytes``. Exit 0 when healthy, 1 when not.

The broker is found from ``--address``, else from the broker's own config
(``--config`` file and ``DUOMQ_*`` environment, as ``duomq broker`` reads
them), dialled on 127.0.0.1 when it listens on every interface.
"""

from __future__ import annotations

import os
import socket
import time
from urllib.parse import urlsplit

from duomq.auth.credentials import Credentials, load_broker_keys, load_broker_trust, resolve_credentials
from duomq.cli.common import add_json, emit
from duomq.client.remoting import KeyMismatch, RemotingClient
from duomq.common.config import BrokerConfig
from duomq.common.errors import DuomqError
from duomq.proto import pb


def add(sub) -> None:
    p = sub.add_parser("health", help="liveness and readiness probes of a local broker")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--live", action="store_true", help="the broker answers on its ports")
    what.add_argument("--ready", action="store_true", help="the broker is ready to serve")
    add_target(p)
    p.add_argument("--timeout", type=float, default=2.0, help="seconds to wait (2)")
    add_json(p)
    p.set_defaults(func=run)


def add_target(p) -> None:
    p.add_argument("--config", default=os.environ.get("DUOMQ_CONFIG"),
                   help="the broker's TOML config (default: $DUOMQ_CONFIG)")
    p.add_argument("--address", help="the broker's client endpoint, tcp://host:port")
    p.add_argument("--ha-port", type=int, help="its replication port (default: from config)")


def target(args) -> tuple[str, int | None, BrokerConfig | None]:
    """(client endpoint, replication port or None, the broker's config or None)."""
    if args.address:
        return args.address, args.ha_port, None
    cfg = BrokerConfig.load(args.config)
    return cfg.local_address, args.ha_port or cfg.ha_port, cfg


def local_credentials(cfg: BrokerConfig | None) -> Credentials | None:
    """What a probe in the broker's pod dials with: a secured broker's own
    key (the broker key is admitted and may ask its status), else a user's
    from ``$DUOMQ_CREDENTIALS``, else none."""
    if cfg is not None and cfg.auth:
        keys = load_broker_keys(cfg.auth_dir)
        return Credentials("broker", keys, keys.public,
                           trusted_broker_keys=load_broker_trust(cfg.auth_dir))
    return resolve_credentials(None)


def broker_status(address: str, timeout_s: float, credentials: Credentials | None = None
                  ) -> tuple[pb.BrokerStatusResponse, float]:
    """The broker's status and the round trip in ms; raises DuomqError."""
    remoting = RemotingClient("duomq-health", credentials=credentials)
    # during a broker key rotation the broker may serve any key we trust:
    # each failed handshake makes the next call expect the next key
    tries = len(credentials.broker_keys) if credentials is not None else 1
    try:
        for left in range(tries - 1, -1, -1):
            t0 = time.monotonic()
            try:
                status, error, resp = remoting.call(address, pb.BROKER_STATUS,
                                                    pb.BrokerStatusRequest(), timeout_s)
                break
            except KeyMismatch:
                if not left:
                    raise
        ms = (time.monotonic() - t0) * 1000
    finally:
        remoting.close()
    if status != pb.OK or resp is None:
        raise DuomqError(f"{address} answered {pb.Status.Name(status)}: {error}")
    return resp, ms


def port_open(host: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def check(args) -> dict:
    address, ha_port, cfg = target(args)
    out: dict[str, object] = {"address": address, "probe": "live" if args.live else "ready"}
    try:
        st, ms = broker_status(address, args.timeout, local_credentials(cfg))
    except DuomqError as exc:
        return {**out, "ok": False, "reason": f"no answer: {exc}"}
    who = f"broker {st.broker_group}/{st.broker_id}"
    out |= {"broker": f"{st.broker_group}/{st.broker_id}", "role": st.role,
            "epoch": st.epoch, "answer_ms": round(ms, 1)}
    if args.live:
        host = urlsplit(address).hostname or "127.0.0.1"
        if ha_port and not port_open(host, ha_port, args.timeout):
            return {**out, "ok": False, "reason": f"{who} answers, but its replication port "
                                                  f"{ha_port} refuses connections"}
        return {**out, "ok": True, "reason": f"{who} answered in {ms:.1f} ms"
                + (f"; replication port {ha_port} open" if ha_port else "")}
    return {**out, "ok": st.ready, "reason": f"{who}: {st.ready_reason}"}


def run(args) -> int:
    result = check(args)
    if args.json:
        emit(result)
    else:
        print(("ok: " if result["ok"] else "not ok: ") + result["reason"])
    return 0 if result["ok"] else 1
