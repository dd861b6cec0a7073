"""Failover drills a user runs against their own cluster (``duomq drill``):
a journaled workload, faults injected round after round by a driver, a
checker that reads everything back (Jepsen's total-queue checker: lost,
unexpected, duplicated, recovered; RTO per round; split brain), and a
report (JSON, a summary table, a plot)."""
