"""Store volumes for dev brokers: ``duomq dev up --store-size 256M`` gives
each broker's store a filesystem of its own, an ext4 image loop-mounted at
the broker's ``store`` directory (root only), so that a drill can fill one
broker's disk (``disk-full-master``) without touching the host's. fsync is
real: the image is an ordinary file of the host's filesystem.

A small volume cannot hold the default files (1 GiB commit-log segments, a
420 MB key index), so ``scaled_settings`` sizes them to the volume unless
the user set them."""

from __future__ import annotations

import os
import re
import subprocess

from duomq.common.config import BrokerConfig
from duomq.common.errors import ConfigError

MIB = 1 << 20
MIN_SIZE = 64 * MIB
_UNITS = {"": 1, "K": 1 << 10, "M": MIB, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``256M``, ``1G``, ``67108864``: bytes; at least 64 MiB."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ConfigError(f"--store-size: {text!r} is not a size (e.g. 256M, 1G)")
    size = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if size < MIN_SIZE:
        raise ConfigError(f"--store-size: {text} is below the smallest volume, 64M")
    return size


def scaled_settings(size: int, settings: dict) -> dict:
    """Store file sizes for a volume of ``size`` bytes (what ``settings``
    already sets wins): commit-log segments of 1/128 of it (1 MiB at least),
    so a drill's load rolls a segment every few seconds; consume-queue and
    key-index files a few MiB each."""
    d = BrokerConfig                              # never above the defaults
    segment = max(MIB, min(d.segment_size_bytes, size // 128))
    scaled = {"segment_size_bytes": segment,
              "cq_entries_per_segment": min(d.cq_entries_per_segment, max(1000, segment // 64)),
              "index_slot_count": min(d.index_slot_count, max(1000, size // 1024)),
              "index_max_entries": min(d.index_max_entries, max(4000, size // 256))}
    if "max_message_bytes" not in settings:
        scaled["max_message_bytes"] = min(4 * MIB, segment // 4)
    return {**scaled, **settings}


def _run(*argv: str) -> None:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise ConfigError(f"{' '.join(argv)} failed: {(p.stderr or p.stdout).strip()}")


def mount(bdir: str, size: int) -> dict:
    """Mount ``bdir/store.img`` (made, size ``size``, if missing) at
    ``bdir/store``. Returns the volume's description for the dev state."""
    if os.geteuid() != 0:
        raise ConfigError("--store-size needs root: each store is a loop-mounted ext4 image")
    image, point = os.path.join(bdir, "store.img"), os.path.join(bdir, "store")
    os.makedirs(point, exist_ok=True)
    if os.path.ismount(point):
        return {"image": image, "mount": point, "size": os.path.getsize(image)}
    if os.listdir(point):
        raise ConfigError(f"{point} already holds a store outside a volume: --store-size "
                          f"would hide it (use another --data-dir)")
    if not os.path.exists(image):
        with open(image, "wb") as f:
            f.truncate(size)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0", image)
    _run("mount", "-o", "loop", image, point)
    return {"image": image, "mount": point, "size": os.path.getsize(image)}


def unmount(volume: dict) -> bool:
    """Unmount a volume (its brokers stopped); the image stays for the next
    ``dev up``. False when it was not mounted."""
    point = volume["mount"]
    if not os.path.ismount(point):
        return False
    _run("umount", point)
    return True
