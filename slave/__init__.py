"""The slave role (next release, the HA issue): apply the replicated log to the
local store, serve read-only pulls, answer sends with NOT_MASTER, promote on
failover. Empty until then; the master role lives in ``duomq.master``."""
