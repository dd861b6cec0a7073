"""Log replication over ZeroMQ (RocketMQ's HAService / HAConnection / HAClient).

Driven by the slave: its DEALER reports its max offset to the master's HA
ROUTER; the master streams ``(epoch, offset, bytes)`` chunks from there (large
when the slave is behind, a heartbeat when idle), at most ``ha_window_bytes``
ahead of what the slave acknowledged. The slave writes the bytes at the same
offsets, so the logs are byte-identical. PUB/SUB is never used: it drops at
the high-water mark.

``protocol`` is pure (link states, the confirmed offset); ``ha_service`` is the
master side, run by the broker's serving thread; ``ha_client`` is the slave
side, a thread of its own.
"""
