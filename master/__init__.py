"""A master's duties, in small modules the broker (``duomq.broker``) uses:
``offsets`` (consumer offsets, persisted and streamed to slaves),
``pull_hold`` (long polling), ``ack_waiters`` (sends waiting for their flush
and replication), ``schedule`` and ``requeue`` (delayed, retried and
dead-lettered messages), ``queue_locks`` (orderly consumption),
``read_advice`` (sending backlogged readers to slaves), ``health`` (probes)
and ``roles`` (taking over, handing over, stepping down).
"""
