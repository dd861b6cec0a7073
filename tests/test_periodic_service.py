"""A periodic task that keeps failing the same way (a full disk) is logged
once with its traceback and then once a minute, not every interval."""

import logging
import threading

from duomq.common.service import PeriodicService


def test_a_repeated_failure_is_logged_once_and_its_end_too(caplog):
    calls = []
    done = threading.Event()

    def task():
        calls.append(1)
        if len(calls) <= 6:
            raise OSError(28, "No space left on device")
        if len(calls) == 8:
            done.set()

    svc = PeriodicService("checkpoint", 0.01, task, run_first=True)
    with caplog.at_level(logging.INFO, logger="duomq.common.service"):
        svc.start()
        assert done.wait(10)
        svc.shutdown()
    failed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert "No space left" in str(failed[0].exc_info[1])
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_a_different_failure_is_logged_with_its_traceback(caplog):
    errors = iter([OSError(28, "No space left on device"), ValueError("bad"), None])
    done = threading.Event()

    def task():
        exc = next(errors, None)
        if exc is None:
            done.set()
            return
        raise exc

    svc = PeriodicService("offset-persist", 0.01, task, run_first=True)
    with caplog.at_level(logging.INFO, logger="duomq.common.service"):
        svc.start()
        assert done.wait(10)
        svc.shutdown()
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [OSError, ValueError]
