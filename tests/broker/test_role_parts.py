"""Both roles' parts answer every call of broker/role_parts.py's RoleParts
with the same parameters (mypy checks the types where role_switch assigns
them; this checks that no member is missing or named differently, static
methods included), and a slave's parts refuse a master's duties by saying
who the master is."""

from __future__ import annotations

import inspect

import pytest

from duomq.broker.role_parts import RoleParts
from duomq.common.errors import NotMasterError
from duomq.master.parts import MasterParts
from duomq.slave.parts import SlaveParts

MEMBERS = sorted(name for name in vars(RoleParts)
                 if not name.startswith("_") and name not in ("__init__",))


def parameters(cls, name: str) -> list[str] | None:
    """The member's parameter names, without ``self`` (None: not callable)."""
    member = inspect.getattr_static(cls, name)
    if isinstance(member, staticmethod):
        return list(inspect.signature(member.__func__).parameters)
    if isinstance(member, property) or not callable(member):
        return None
    return list(inspect.signature(member).parameters)[1:]


def test_the_protocol_names_the_calls_the_broker_makes():
    assert {"visible", "read_advice", "describe", "pump", "housekeeping", "on_replication",
            "lag_refusal", "master_duties", "ready_acks", "stop"} <= set(MEMBERS)


@pytest.mark.parametrize("name", MEMBERS)
def test_both_roles_answer_each_call_with_the_same_parameters(name):
    want = parameters(RoleParts, name)
    for cls in (MasterParts, SlaveParts):
        assert hasattr(cls, name), f"{cls.__name__} lacks {name}"
        if want is not None:
            assert parameters(cls, name) == want, f"{cls.__name__}.{name}"


def test_a_slave_refuses_a_masters_duties_naming_the_master():
    parts = SlaveParts()
    with pytest.raises(NotMasterError, match="the master is at 10.0.0.7:10911"):
        parts.master_duties(lambda: parts.why_not_writable("broker broker-a/1", "10.0.0.7:10911"))
    assert not parts.writable(0.0) and parts.ready_acks(0, 0.0) == [] and not parts.leads
    assert parts.lag_refusal(500, "broker-a/1") == (None, None)     # following nobody
