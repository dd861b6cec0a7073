"""A broker pod's termination grace period, shared out. When a pod stops,
the kubelet runs its preStop hook (``duomq failover --step-down``: a master
hands its group over), then sends SIGTERM, then SIGKILL when the grace
period is over. So the hand-over gets what the broker's own stop and a
margin leave; the broker's stop after SIGTERM is held to ``STOP_S`` by a
watchdog (``broker.server``). One setting: the pod's
``terminationGracePeriodSeconds``, which the StatefulSet also gives the pod
as ``DUOMQ_TERMINATION_GRACE_S`` (a test keeps the two equal), read here."""

from __future__ import annotations

import os
from collections.abc import Mapping

from duomq.common.errors import ConfigError

GRACE_ENV = "DUOMQ_TERMINATION_GRACE_S"
STOP_S = 15.0           # the broker's own stop after SIGTERM, at most (its watchdog)
MARGIN_S = 5.0          # starting the hook's process, the kubelet's own delays
MIN_HANDOVER_S = 10.0   # less cannot hand a group over


def handover_budget(grace_s: float) -> float:
    """Seconds the preStop hand-over may take of a ``grace_s`` grace period."""
    budget = grace_s - STOP_S - MARGIN_S
    if budget < MIN_HANDOVER_S:
        raise ConfigError(
            f"a grace period of {grace_s:g} s leaves {budget:g} s for the hand-over after the "
            f"broker's stop ({STOP_S:g} s) and a margin ({MARGIN_S:g} s): give the pod at least "
            f"{MIN_HANDOVER_S + STOP_S + MARGIN_S:g} s (terminationGracePeriodSeconds and "
            f"{GRACE_ENV})")
    return budget


def grace_from_env(environ: Mapping[str, str] = os.environ) -> float | None:
    """The pod's grace period as ``DUOMQ_TERMINATION_GRACE_S`` says, or None."""
    raw = environ.get(GRACE_ENV, "").strip()
    if not raw:
        return None
    try:
        grace = float(raw)
    except ValueError:
        raise ConfigError(f"{GRACE_ENV}={raw!r} is not a number of seconds") from None
    if grace <= 0:
        raise ConfigError(f"{GRACE_ENV}={raw!r} must be above 0")
    return grace
