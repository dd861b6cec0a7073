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
