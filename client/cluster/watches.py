"""The data of every child of watched ZooKeeper nodes, kept current by a
children watch per parent and a data watch per child (no polling). Routes and
broker members are both kept this way."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from kazoo.client import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_READ_S = 5.0      # a new watch's first read is waited for this long (ZooKeeper away: empty)
_reading = threading.local()    # .on: this thread is making a first read (its listeners run in it)


class ChildrenData(Generic[T]):
    """``key -> {child name -> parse(child data)}`` for each watched parent.

    ``parse`` turns node data into a value (a node it cannot parse is left
    out, with a warning); ``on_change(key)`` runs in kazoo's thread after any
    change under that key."""

    def __init__(self, zk, parse: Callable[[bytes], T],
                 on_change: Callable[[str], None] | None = None):
        self.zk = zk
        self.parse = parse
        self.on_change = on_change
        self._data: dict[str, dict[str, T]] = {}
        self._bad: dict[str, dict[str, str]] = {}     # key -> {child: why it is unreadable}
        self._paths: dict[str, str] = {}
        self._nodes: set[tuple[str, str]] = set()
        self._versions: dict[str, int] = {}       # key -> changes seen
        self._first: dict[str, threading.Event] = {}   # key -> its first read is done
        self._cond = threading.Condition()
        self._closed = False

    def watch(self, key: str, path: str) -> None:
        """Watch ``path``'s children. A parent that does not exist is not
        made (a reader never writes: a typo in a group's name registered a
        phantom group, a topic never created left its route node): it is
        watched until it appears, and again after it is deleted."""
        with self._cond:
            first = self._first.get(key)
            if first is None:         # the first read is done (the children's data too)
                first = self._first[key] = threading.Event()
                self._paths[key] = path
                self._data.setdefault(key, {})
                started = False
            else:
                started = True
        if started:
            # another thread set this watch: its first read is waited for here
            # too (a caller that found the key watched read an empty view
            # while the first read was under way: "no live broker")
            # -- but not from inside a first read: a listener the read itself
            # runs (a route change asking for the route) would wait on itself
            if self.zk.connected and not first.is_set() and not getattr(_reading, "on", False):
                first.wait(FIRST_READ_S)
            return
        running = [False]             # a children watch is on the parent now

        def on_parent(_data, stat) -> bool:
            if self._closed:
                return False
            was, _reading.on = getattr(_reading, "on", False), True
            try:
                return read(stat)
            finally:
                _reading.on = was

        def read(stat) -> bool:
            if stat is None:          # absent, or deleted: its children went with it
                if running[0]:
                    running[0] = False
                    self._on_children(key, [])
            elif not running[0]:
                running[0] = True
                ChildrenWatch(self.zk, path,
                              lambda children: running[0] and self._on_children(key, children))
            first.set()
            return True
        # set from a thread of its own: kazoo's first read of a watch retries
        # until ZooKeeper answers; the caller waits for it a while, not for ever
        self.zk.handler.spawn(DataWatch, self.zk, path, on_parent)
        if self.zk.connected:
            first.wait(FIRST_READ_S)

    def keys(self) -> list[str]:
        """The keys watched so far."""
        with self._cond:
            return list(self._paths)

    def get(self, key: str, wait_s: float = 0.0) -> dict[str, T]:
        """A copy of the key's children data, waiting up to ``wait_s`` for a
        first non-empty answer (or an unreadable child: no use waiting)."""
        with self._cond:
            if wait_s > 0:
                self._cond.wait_for(lambda: self._data.get(key) or self._bad.get(key),
                                    timeout=wait_s)
            return dict(self._data.get(key, {}))

    def unreadable(self, key: str) -> dict[str, str]:
        """The key's children that could not be parsed, and why."""
        with self._cond:
            return dict(self._bad.get(key, {}))

    def refresh(self, key: str, timeout_s: float = 2.0) -> None:
        """Read a watched key's children and their data now, without waiting
        for the watches (after a broker said the client's view is stale).
        Uses the asynchronous calls with a deadline, so a suspended session
        cannot block the caller; what cannot be read is left as it was."""
        path = self._paths.get(key)
        if path is None or self.zk.state != KazooState.CONNECTED:
            return                   # ZooKeeper is away: the watches catch up on its return
        try:
            children = self.zk.get_children_async(path).get(timeout=timeout_s)
            fresh = {}
            for child in children:
                data, _ = self.zk.get_async(f"{path}/{child}").get(timeout=timeout_s)
                try:
                    fresh[child] = self.parse(data)
                except (KeyError, ValueError, TypeError) as exc:
                    log.warning("unreadable node %s/%s ignored: %s", path, child, exc)
        except Exception as exc:         # NoNode, a timeout, a lost session: keep the view
            log.info("refresh of %s failed (%s); the watches will catch up", path, exc)
            return
        with self._cond:
            if self._data.get(key) == fresh:
                return                   # nothing new: no change to wake anyone for
            self._data[key] = fresh
            self._cond.notify_all()
        self._changed(key)

    def _on_children(self, key, children):
        if self._closed:
            return False
        for child in children:
            if (key, child) not in self._nodes:
                self._nodes.add((key, child))
                # kazoo passes the event as a third argument to a callback that
                # takes three, so the names are bound by closure
                DataWatch(self.zk, f"{self._paths[key]}/{child}", self._node_watcher(key, child))
        with self._cond:
            known = self._data.setdefault(key, {})
            gone = set(known) - set(children)
            for child in gone:
                known.pop(child, None)
                self._bad.get(key, {}).pop(child, None)
            self._cond.notify_all()
        if gone:
            self._changed(key)
        return True

    def _node_watcher(self, key, child):
        return lambda data, stat: self._on_node(key, child, data)

    def _on_node(self, key, child, data):
        if self._closed:
            return False
        with self._cond:
            known = self._data.setdefault(key, {})
            bad = self._bad.setdefault(key, {})
            before = known.get(child)
            bad.pop(child, None)
            if data is None:
                known.pop(child, None)
            else:
                try:
                    known[child] = self.parse(data)
                except (KeyError, ValueError, TypeError) as exc:
                    known.pop(child, None)
                    bad[child] = str(exc)
                    log.warning("unreadable node %s/%s ignored: %s", self._paths[key], child, exc)
                    self._cond.notify_all()
            if known.get(child) == before and before is not None:
                return True              # the same value again (a re-read): not a change
            self._cond.notify_all()
        self._changed(key)
        return True

    def version(self, key: str) -> int:
        """How many changes under ``key`` were seen (for ``wait_change``)."""
        return self._versions.get(key, 0)

    def wait_change(self, key: str, since: int, timeout_s: float) -> bool:
        """Wait until something under ``key`` changes after version ``since``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._versions.get(key, 0) != since,
                                       timeout=max(0.0, timeout_s))

    def _changed(self, key) -> None:
        with self._cond:
            self._versions[key] = self._versions.get(key, 0) + 1
            self._cond.notify_all()
        if self.on_change is not None:
            try:
                self.on_change(key)
            except Exception:
                log.exception("watch listener failed")

    def close(self) -> None:
        self._closed = True
