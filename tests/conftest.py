"""Fixtures of tests/ alone; those both folders share are
duomq.testing.pytest_plugin's (pyproject's addopts loads it once)."""

import os

import pytest

from duomq.transport import zmtp


@pytest.fixture(params=["c", "python"])
def zmtp_both_ways(request):
    """ZMTP frames read and written in C (transport/_zmtp.c), then by the
    Python reference (``zmtp.use``). A build without the C twin fails the C
    half, unless DUOMQ_NATIVE=0 says to go without (then it is skipped)."""
    if request.param == "c" and zmtp.NATIVE is None:
        if os.environ.get("DUOMQ_NATIVE") == "0":
            pytest.skip("DUOMQ_NATIVE=0: no C framing")
        pytest.fail("duomq.transport._zmtp is not built: `pip install -e .` needs a C compiler")
    zmtp.use(request.param == "c")
    yield request.param
    zmtp.use(True)
