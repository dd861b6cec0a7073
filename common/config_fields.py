"""How configuration fields are checked and read from text (pure), for
every role's config class (``config.py``): declared types, non-negative
numbers, ``FIELD=VALUE`` settings and their coercion."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from duomq.common.errors import ConfigError

TRANSPORTS = ("auto", "native", "zeromq")   # client ports and client sockets (transport.zmtp)


def _check_client_transport(transport: str, field: str = "transport") -> None:
    if transport not in TRANSPORTS:
        raise ConfigError(f"{field}: {transport!r} is not one of {', '.join(TRANSPORTS)}")


def check_port_transports(cfg) -> None:
    """A broker's ports: each transport one of TRANSPORTS, and not native
    with auth (CURVE and ZAP are libzmq's)."""
    for field in ("client_transport", "ha_transport"):
        value = getattr(cfg, field)
        _check_client_transport(value, field)
        if cfg.auth and value == "native":
            raise ConfigError(f"{field} = \"native\" speaks no CURVE: with auth = true the "
                              f"port is ZeroMQ's (\"zeromq\" or \"auto\")")


def _check_metrics_port(port: int) -> None:
    if not -1 <= port < 65536:
        raise ConfigError(f"metrics_port: {port} must be a TCP port (0: a free one, -1: no "
                          f"metrics)")


_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                       "str": (str,), "int | None": (int, type(None))}


NEGATIVE_ALLOWED = frozenset({"metrics_port"})


def check_types(obj) -> None:
    """Every field holds its declared type (a TOML file is typed: ``port =
    "abc"`` or ``promotable = "no"`` is an error, not a string that happens to
    compare), and no number is negative: times, sizes and counts all start at 0
    (``metrics_port`` takes -1 for "none", checked by its class)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        allowed = _TYPES.get(str(f.type))
        if allowed is None:
            continue                      # enums: checked by _enum
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            raise ConfigError(f"{f.name}: {value!r} is not a valid {f.type}")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0 \
                and f.name not in NEGATIVE_ALLOWED:
            raise ConfigError(f"{f.name}: must be >= 0, got {value!r}")


def _positive(obj, *names):
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name}: must be a positive number, got {value!r}")


def _check_known(cls, data: dict, where: str):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")


def parse_settings(cls, items: list[str], where: str = "--set") -> dict[str, Any]:
    """``FIELD=VALUE`` strings (the CLI's ``--set``) as config values, each
    coerced to its field's type as ``DUOMQ_*`` variables are."""
    by_name = {f.name: f for f in fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq:
            raise ConfigError(f"{where}: {item!r} is not FIELD=VALUE")
        if key not in by_name:
            raise ConfigError(f"{where}: unknown config field {key!r}")
        out[key] = _coerce(by_name[key], text, f"{where} {key}")
    return out


def _coerce(f, text: str, key: str):
    typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    try:
        if typ == "int":
            return int(text)
        if typ == "int | None":      # empty: the default that follows another field
            return int(text) if text.strip() else None
        if typ == "float":
            return float(text)
        if typ == "bool":
            if text.lower() in ("1", "true"):
                return True
            if text.lower() in ("0", "false"):
                return False
            raise ValueError(text)
    except ValueError:
        hint = " (true or false)" if typ == "bool" else ""
        raise ConfigError(f"{key}: {text!r} is not a valid {typ}{hint}") from None
    return text
