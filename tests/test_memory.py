"""The page-cache budget under a memory cgroup (common.memory), read from
cgroup v1 and v2 trees laid out as the kernel lays them out."""

import psutil

from duomq.common.memory import cgroup_memory_limit, usable_memory

GIB = 1 << 30


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v2_takes_the_tightest_limit_up_the_tree(tmp_path):
    root = tmp_path / "fs"
    write(root / "cgroup.controllers", "cpu memory\n")
    write(root / "kubepods" / "memory.max", str(8 * GIB))
    write(root / "kubepods" / "pod1" / "memory.max", "max\n")
    write(root / "kubepods" / "pod1" / "broker" / "memory.max", str(4 * GIB))
    write(tmp_path / "cgroup", "0::/kubepods/pod1/broker\n")
    assert cgroup_memory_limit(str(tmp_path / "cgroup"), str(root)) == 4 * GIB
    write(root / "kubepods" / "pod1" / "broker" / "memory.max", "max\n")
    assert cgroup_memory_limit(str(tmp_path / "cgroup"), str(root)) == 8 * GIB


def test_v2_in_a_container_namespace_reads_the_mount_root(tmp_path):
    root = tmp_path / "fs"
    write(root / "cgroup.controllers", "memory\n")
    write(root / "memory.max", str(GIB))
    write(tmp_path / "cgroup", "0::/\n")
    assert cgroup_memory_limit(str(tmp_path / "cgroup"), str(root)) == GIB
    assert usable_memory(str(tmp_path / "cgroup"), str(root)) == min(GIB, psutil.virtual_memory().total)


def test_v1_memory_controller_and_no_limit(tmp_path):
    root = tmp_path / "fs"
    write(root / "memory" / "job" / "memory.limit_in_bytes", str(2 * GIB))
    write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")
    write(tmp_path / "cgroup", "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n")
    assert cgroup_memory_limit(str(tmp_path / "cgroup"), str(root)) == 2 * GIB
    write(root / "memory" / "job" / "memory.limit_in_bytes", "9223372036854771712\n")
    assert cgroup_memory_limit(str(tmp_path / "cgroup"), str(root)) is None
    assert usable_memory(str(tmp_path / "cgroup"), str(root)) == psutil.virtual_memory().total


def test_no_cgroup_information_means_the_machine(tmp_path):
    assert cgroup_memory_limit(str(tmp_path / "missing"), str(tmp_path)) is None
    assert usable_memory(str(tmp_path / "missing"), str(tmp_path)) == psutil.virtual_memory().total


def test_this_machine_gives_a_positive_figure():
    assert 0 < usable_memory() <= psutil.virtual_memory().total
