"""Flushing the commit log to disk (RocketMQ's ``FlushManager``).

``GroupCommitService`` (SYNC_FLUSH): sends wait until the flushed offset passes
their record; one fdatasync serves every send waiting at that moment.
``FlushRealTimeService`` (ASYNC_FLUSH): flush every ``flush_interval_ms`` when
at least ``flush_least_pages`` pages are dirty, and everything every
``flush_thorough_interval_ms``. (The store checkpoint, which flushes consume
queues, is a periodic task of the broker: ``MessageStore.checkpoint``.)
"""

from duomq.flush.services import FlushRealTimeService, GroupCommitService, make_flush_service

__all__ = ["FlushRealTimeService", "GroupCommitService", "make_flush_service"]
