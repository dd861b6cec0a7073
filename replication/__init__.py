"""Log replication over ZeroMQ (RocketMQ's HAService / HAConnection / HAClient).

Driven by the slave: its DEALER reports its max offset to the master's HA
ROUTER; the master streams ``(epoch, offset, bytes)`` chunks from there (large
when the slave is behind, a heartbeat when idle), at most ``ha_window_bytes``
ahead of what the slave acknowledged. The slave writes the bytes at the same
offsets, so the logs are byte-identical. PUB/SUB is never used: it drops at
the high-water mark.

This package holds what both roles share, pure: ``protocol`` (the link state
table, the confirmed offset, the SYNC ack rule) and ``read_advice`` (when a
master sends a reader to a slave and a slave sends it back). The master side
is ``duomq.master.ha_service``, run by the broker's serving thread; the slave
side is ``duomq.slave.ha_client``, a thread of its own.
"""
