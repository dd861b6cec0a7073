"""Log replication over ZeroMQ (RocketMQ's HAService / HAConnection / HAClient).

Driven by the slave: its DEALER reports its max offset to the master's HA
ROUTER; the master streams ``(epoch, offset, bytes)`` chunks from there (large
when the slave is behind, a heartbeat when idle), at most ``ha_window_bytes``
ahead of what the slave acknowledged. The slave writes the bytes at the same
offsets, so the logs are byte-identical. PUB/SUB is never used: it drops at
the high-water mark.

Both ends live here, as RocketMQ's ``store/ha`` holds them: ``ha_service``
(the master's end: its links to its slaves, run by the broker's serving
thread, held by ``master.parts.MasterParts`` for a term) and ``ha_client``
(the slave's end, a thread of its own, held by ``slave.parts.SlaveParts``);
what both share, pure: ``protocol`` (the link state table, the confirmed
offset, the SYNC ack rule) and ``read_advice`` (when a master sends a
reader to a slave and a slave sends it back). The two ends meet only in
``protocol`` and on the wire (an import-linter contract says so).
"""
