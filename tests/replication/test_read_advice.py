import os

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.replication.read_advice import master_says_go_to_slave, slave_says_go_back
from duomq.store import MessageStore
from duomq.store.residency import PROBE_AHEAD, PROBE_BYTES, resident_fraction, window_residency

GIB = 1 << 30


def test_ratio_rule_when_residency_is_unknown():
    assert not master_says_go_to_slave(int(0.39 * 24 * GIB), 24 * GIB, 0.40, None, True)
    assert master_says_go_to_slave(int(0.41 * 24 * GIB), 24 * GIB, 0.40, None, True)


def test_residency_decides_when_known_and_a_slave_must_be_in_sync():
    assert master_says_go_to_slave(1 << 20, 24 * GIB, 0.40, 0.0, True)        # cold, small
    assert not master_says_go_to_slave(20 * GIB, 24 * GIB, 0.40, 1.0, True)   # hot, large
    assert not master_says_go_to_slave(20 * GIB, 24 * GIB, 0.40, 0.0, False)  # no slave


def test_slave_sends_back_below_the_lower_ratio_within_the_hot_tail_only_with_a_master():
    assert slave_says_go_back(1 << 20, 24 * GIB, 0.30, True)
    assert not slave_says_go_back(64 << 20, 24 * GIB, 0.30, True)         # hot tail: 8 MiB
    assert not slave_says_go_back(int(0.31 * 64 * (1 << 20)), 64 << 20, 0.30, True)  # ratio
    assert not slave_says_go_back(0, 24 * GIB, 0.30, False)


def test_mincore_sees_eviction(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.read(fd, 1 << 20)                                   # now cached
        assert resident_fraction(fd, 0, 1 << 20) == 1.0
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)     # evict
        assert resident_fraction(fd, 0, 1 << 20) < 0.5
    finally:
        os.close(fd)


def test_a_cached_pull_position_deep_in_a_cold_log_is_still_cold(tmp_path):
    """Readahead caches a sequential reader's next window: the window
    PROBE_AHEAD further on tells that the backlog is cold."""
    store = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=64 << 20))
    store.start()
    body = b"x" * 4000
    one = rec.encode_record(b"T", b"", b"", b"", body, 1)
    while store.commitlog.max_offset < PROBE_AHEAD + 4 * PROBE_BYTES:
        store.put_batch("T", 0, bytearray(one * 64), 64)
    store.commitlog.flush()
    seg = store.commitlog.mfq.find(0)
    os.posix_fadvise(seg.fd, 0, 0, os.POSIX_FADV_DONTNEED)
    assert resident_fraction(seg.fd, 0, seg.wrote) < 0.1     # the log is cold now
    os.pread(seg.fd, PROBE_BYTES, 0)                  # the pull position is cached now
    behind = store.commitlog.max_offset
    assert resident_fraction(seg.fd, 0, PROBE_BYTES) == 1.0
    assert window_residency(store.commitlog.mfq, 0, behind) < 0.5
    assert window_residency(store.commitlog.mfq, 0, PROBE_AHEAD) == 1.0   # no room for a second window
    store.close()
