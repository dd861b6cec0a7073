"""A full disk, for real: a 3 MiB tmpfs mounted for the test (root only; CI
runs as root). Segments are preallocated or refused; a write that finds no
room stores nothing and says ENOSPC; a restart after a crash on the full disk
recovers, and a file a version left sparse is completed or refused with a
clear error, never a SIGBUS."""

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

SETTINGS = dict(segment_size_bytes=1 << 20, max_message_bytes=64 << 10, max_pull_bytes=1 << 20,
                cq_entries_per_segment=1000, index_slot_count=1000, index_max_entries=1000)

FILL = """
import errno, os, sys
from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.store import MessageStore
store = MessageStore(BrokerConfig(data_dir=sys.argv[1], **{settings!r}))
store.start()
acked = 0
try:
    for i in range(100_000):
        record = rec.encode_record(b"T", b"", b"k%d" % i, b"", bytes([i % 251]) * 10_000, 1)
        store.put_batch("T", i % 2, bytearray(record), 1)
        store.commitlog.flush()
        acked += 1
except OSError as exc:
    print(acked, exc.errno, exc, flush=True)
    os._exit(0)          # as kill -9: no close, no checkpoint
print("never full", flush=True)
"""

READ = """
import sys
from duomq.common.config import BrokerConfig
from duomq.common.message import decode_records
from duomq.store import MessageStore
store = MessageStore(BrokerConfig(data_dir=sys.argv[1], **{settings!r}))
print(store.start(), flush=True)
bodies = []
for qid in (0, 1):
    off = 0
    while True:
        got = store.get_messages("T", qid, off, 64, 1 << 20, store.commitlog.max_offset)
        if not got.count:
            break
        bodies += [m.body for m in decode_records(got.records)]
        off = got.next_offset
print(len(bodies), len(set(bodies)), flush=True)
"""


@pytest.fixture
def disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def python(script: str, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(script.format(settings=SETTINGS)),
                        *args], capture_output=True, text=True, timeout=120)
    assert p.returncode != -signal.SIGBUS, "SIGBUS:\n" + p.stderr
    return p


def allocated(path) -> bool:
    st = os.stat(path)
    return st.st_blocks * 512 >= st.st_size


def test_a_full_disk_refuses_the_write_stores_nothing_and_recovers_after_a_crash(disk):
    data = disk / "store"
    p = python(FILL, str(data))
    assert p.returncode == 0, p.stderr
    acked, err, message = p.stdout.split(" ", 2)
    assert int(err) == errno.ENOSPC and int(acked) > 100
    assert "cannot preallocate" in message or "No space left" in message
    assert "cannot store" in message and "nothing was stored" in message   # StoreFullError
    segments = sorted((data / "commitlog").iterdir())
    assert segments and all(allocated(s) for s in segments)   # nothing sparse was left
    # the restart after the crash, on the still full disk
    p = python(READ, str(data))
    assert p.returncode == 0, p.stderr
    count, distinct = map(int, p.stdout.splitlines()[-1].split())
    assert count == distinct >= int(acked)                   # every acked record is back
    # and it can go on: more records fail cleanly, again
    p = python(FILL, str(data))
    assert p.returncode == 0 and int(p.stdout.split()[1]) == errno.ENOSPC, p.stderr + p.stdout


def test_a_segment_left_sparse_is_refused_with_its_name_on_a_full_disk(disk):
    data = disk / "store"
    python(FILL, str(data))
    commitlog = data / "commitlog"
    last = sorted(commitlog.iterdir())[-1]
    sparse = commitlog / f"{int(last.name) + (1 << 20):020d}"
    with open(sparse, "wb") as f:                             # as an older version left it
        f.truncate(1 << 20)
    p = subprocess.run([sys.executable, "-m", "duomq", "broker", "--data-dir", str(data),
                        "--zookeeper", "127.0.0.1:9", "--port", "0", "--set", "ha_port=0",
                        "--set", "metrics_port=0",
                        *[f"--set={k}={v}" for k, v in SETTINGS.items()]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"cannot preallocate 1048576 bytes for {sparse}: No space left on device" in \
        p.stderr.strip().splitlines()[-1]


def test_an_index_file_left_sparse_is_refused_not_faulted(disk):
    data = disk / "store"
    python(FILL, str(data))
    index = sorted((data / "index").iterdir())[-1]
    size = index.stat().st_size
    index.unlink()                              # its blocks go to a filler ...
    with open(disk / "filler", "ab") as f:
        with pytest.raises(OSError):
            f.write(bytes(4 << 20))
            f.flush()
    with open(index, "wb") as f:                # ... and it comes back sparse, as an
        f.truncate(size)                        # older version left it on a full disk
    assert not allocated(index)
    p = python(READ, str(data))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "cannot preallocate" in p.stderr and str(index) in p.stderr
