import threading
import time

from duomq.client.scheduler import Scheduler


def wait_until(cond, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_delayed_calls_run_in_time_order_on_one_thread():
    s = Scheduler()
    try:
        seen = []
        s.call_later(0.06, lambda: seen.append(("b", threading.current_thread().name)))
        s.call_later(0.02, lambda: seen.append(("a", threading.current_thread().name)))
        wait_until(lambda: len(seen) == 2)
        assert [x for x, _ in seen] == ["a", "b"]
        assert {t for _, t in seen} == {"duomq-timer"}
    finally:
        s.close()


def test_a_periodic_task_runs_every_interval_and_a_wake_runs_it_at_once_coalesced():
    s = Scheduler()
    try:
        runs = []
        task = s.every(60, lambda: runs.append(time.monotonic()), first_s=0)
        wait_until(lambda: len(runs) == 1)
        t0 = time.monotonic()
        for _ in range(5):
            task.wake()                               # five wake-ups, one run
        wait_until(lambda: len(runs) == 2)
        assert runs[1] - t0 < 1.0
        time.sleep(0.1)
        assert len(runs) == 2
        task.cancel()
        task.wake()
        time.sleep(0.1)
        assert len(runs) == 2
    finally:
        s.close()


def test_a_wake_during_a_run_runs_the_task_again_and_a_failure_keeps_the_period():
    s = Scheduler()
    try:
        runs = []
        release = threading.Event()

        def slow():
            runs.append(1)
            if len(runs) == 1:
                release.wait(5)
            raise RuntimeError("a failing task is logged, and runs again")

        task = s.every(0.05, slow, first_s=0)
        wait_until(lambda: len(runs) == 1)
        task.wake()                                   # while it runs
        release.set()
        wait_until(lambda: len(runs) >= 3)            # the woken run, then the period
        task.cancel()
    finally:
        s.close()


def test_a_sooner_wake_moves_a_later_one_up_and_still_runs_once():
    s = Scheduler()
    try:
        runs = []
        task = s.every(60, lambda: runs.append(time.monotonic()))
        t0 = time.monotonic()
        task.wake(5.0)                  # a retry due in 5 s ...
        task.wake(0.0)                  # ... then a watch says now: it runs now
        wait_until(lambda: len(runs) == 1)
        assert runs[0] - t0 < 1.0
        task.wake(0.0)
        task.wake(5.0)                  # a later wake does not delay a sooner one
        wait_until(lambda: len(runs) == 2)
        assert runs[1] - t0 < 1.0
        time.sleep(0.2)
        assert len(runs) == 2           # the superseded 5 s run was dropped
    finally:
        s.close()
