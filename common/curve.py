"""CURVE keys as duomq keeps them: a keypair, and a key's Z85 text
(40 characters, as ZeroMQ prints them) checked. Nothing here does crypto:
ZeroMQ's CURVE does, with these keys (``auth.credentials`` keeps them in
files)."""

from __future__ import annotations

from dataclasses import dataclass

import zmq
import zmq.utils.z85

from duomq.common.errors import ConfigError


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
