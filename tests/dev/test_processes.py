import subprocess
import sys
import time

from duomq.dev import processes


def test_a_process_is_known_by_its_pid_and_start_time_and_a_zombie_is_gone():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = processes.started_at(proc.pid)
        assert started is not None
        assert processes.alive(proc.pid, started) and processes.alive(proc.pid)
        # the same pid with another start time: a process the pid was given to later
        assert not processes.alive(proc.pid, started - 5)
        assert not processes.stop(proc.pid, started - 5)
        assert not processes.send_signal(proc.pid, 15, started - 5)
        assert proc.poll() is None                        # the stranger was left alone
        t0 = time.monotonic()
        assert processes.stop(proc.pid, started, timeout_s=5)
        assert time.monotonic() - t0 < 5                  # SIGTERM was enough
        assert not processes.alive(proc.pid, started)     # a zombie until reaped: gone
        assert proc.poll() == -15
    finally:
        proc.kill()
        proc.wait()
    assert processes.started_at(proc.pid) is None
    assert not processes.alive(None) and not processes.stop(None)


def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout():
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                             "print('ready', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"       # SIGTERM is ignored from now on
        assert processes.stop(proc.pid, timeout_s=0.5)
        assert proc.wait(5) == -9
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_start_time_is_the_kernels_since_boot_and_no_wall_clock_change_moves_it(monkeypatch):
    """psutil's create_time adds /proc/stat's boot time, whole seconds the
    wall clock derives: a step or slew of the clock moves it, and a run's
    ZooKeeper started before one was taken for a stranger and never
    stopped. The boot time moved by a second here, as such a change moves it."""
    before = time.clock_gettime(time.CLOCK_BOOTTIME)
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = processes.started_at(proc.pid)
        after = time.clock_gettime(time.CLOCK_BOOTTIME)
        assert started is not None and before - 0.02 <= started <= after + 0.02
        import psutil._pslinux as pslinux
        boot = pslinux.boot_time()
        monkeypatch.setattr(pslinux, "boot_time", lambda: boot + 1.0)
        assert processes.alive(proc.pid, started)
        assert processes.stop(proc.pid, started, timeout_s=5)
        assert proc.wait(5) == -15
    finally:
        proc.kill()
        proc.wait()


def test_a_start_time_an_earlier_release_wrote_still_finds_its_process():
    """State files of earlier releases hold psutil's create_time (seconds
    since the epoch): still ours within a second and a half, else a stranger."""
    import psutil
    proc = subprocess.Popen(["sleep", "30"])
    try:
        epoch_start = psutil.Process(proc.pid).create_time()
        assert processes.alive(proc.pid, epoch_start)
        assert processes.alive(proc.pid, epoch_start + 1.0)
        assert not processes.alive(proc.pid, epoch_start - 5)
    finally:
        proc.kill()
        proc.wait()
