"""The store: commit log segments, consume queues, checkpoint, recovery and
retention (RocketMQ's ``store/``).

``MessageStore`` ties them together for the broker (``message_store``: its
lifecycle; it composes ``writes``, ``reads`` and ``reput``, the write path,
the read path and consume-queue dispatch, which share what ``view`` names
and one writer, ``one_writer``); every piece below it is a small module:
``segment`` (one preallocated file), ``mapped_file_queue`` (a directory of
segments named by their 20-digit base offset), ``commitlog``,
``consume_queue``, ``checkpoint``, ``recovery``, ``retention``,
``consumer_offsets`` (the groups' committed offsets), ``producer_state``
(idempotent producers' sequences), ``key_index`` and ``residency`` (what
the page cache holds). The record's layout is ``duomq.format.record``.
"""

from duomq.store.message_store import MessageStore, PutResult

__all__ = ["MessageStore", "PutResult"]
