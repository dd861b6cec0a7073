"""The chaos tests' drills on ``duomq.drill``: the audit of a workload
(read everything back, Jepsen's total-queue checker) and the JSON report
each test keeps in ``.drills/`` (``DRILL_REPORT_DIR``)."""

from __future__ import annotations

import json
import os

from duomq.drill.checker import Report, Round, check
from duomq.drill.load import Workload, read_back

REPORT_DIR = os.environ.get("DRILL_REPORT_DIR", os.path.join(os.getcwd(), ".drills"))


def keep(name: str, doc: dict) -> str:
    """Write ``doc`` as ``REPORT_DIR/name.json`` (and print it); its path."""
    os.makedirs(REPORT_DIR, exist_ok=True)
    path = os.path.join(REPORT_DIR, f"{name}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True, default=str)
    print(f"drill {name}: " + json.dumps(doc, sort_keys=True, default=str)[:2000])
    return path


def audit(name: str, load: Workload, fault_at: float | None = None, *, durable: bool = True,
          **notes) -> Report:
    """Read the workload's topic back (every body, this run's or not: the
    topic is the test's own) and check it; the report is kept as ``name``.
    ``fault_at`` (monotonic): the fault, a round whose RTO is measured."""
    rounds = [Round(0, name, fault_at)] if fault_at is not None else []
    report = check(name, load.journal(), read_back(load.zookeeper, load.cluster, load.topic),
                   rounds, durable=durable)
    if fault_at is not None:
        stored = load.first_stored_after(fault_at)
        report.notes["stored_after_s"] = round(stored - fault_at, 3) if stored else None
    report.notes.update(notes)
    keep(name, report.as_dict())
    return report
