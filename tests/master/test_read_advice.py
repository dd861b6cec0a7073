import os

from duomq.master.read_advice import master_says_go_to_slave, slave_says_go_back
from duomq.store.residency import resident_fraction

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
