"""The store: commit log segments, consume queues, checkpoint, recovery and
retention (RocketMQ's ``store/``).

``MessageStore`` ties them together for the broker; every piece below it is a
small module: ``segment`` (one preallocated file), ``mapped_file_queue`` (a
directory of segments named by their 20-digit base offset), ``commitlog``,
``consume_queue``, ``checkpoint``, ``recovery``, ``retention``, and the pure
codec ``record``.
"""

from duomq.store.message_store import MessageStore, PutResult

__all__ = ["MessageStore", "PutResult"]
