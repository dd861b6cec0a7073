"""Flushing the commit log to disk (RocketMQ's ``FlushManager``).

``GroupCommitService`` (SYNC_FLUSH): sends wait until the flushed offset passes
their record; one fdatasync serves every send waiting at that moment.
``FlushRealTimeService`` (ASYNC_FLUSH): flush every ``flush_interval_ms`` when
at least ``flush_least_pages`` pages are dirty, and everything every
``flush_thorough_interval_ms``. ``CheckpointService`` flushes consume queues
and writes the store checkpoint.
"""

from duomq.flush.services import (CheckpointService, FlushRealTimeService, GroupCommitService,
                                  make_flush_service)

__all__ = ["CheckpointService", "FlushRealTimeService", "GroupCommitService",
           "make_flush_service"]
