"""A broker's presence in ZooKeeper: its member node, the group's master node
with an epoch, and a route node per topic it hosts. Follows topic changes
through watches and re-registers after a session loss."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from kazoo.client import KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.common.errors import ConfigError
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicConfig
from duomq.coordinator.zk import dumps, loads

log = logging.getLogger(__name__)


class BrokerRegistry:
    def __init__(self, zk, config, member_info: Callable[[], dict], max_offset: Callable[[], int]):
        self.zk = zk
        self.config = config
        self.paths = ZkPaths(config.cluster)
        self.member_info = member_info
        self.max_offset = max_offset
        self.epoch = 0
        # topic -> queue count for this group; replaced whole, read by the serving thread
        self.topics: dict[str, int] = {}
        self.topic_configs: dict[str, TopicConfig] = {}
        self._watched: set[str] = set()
        self._lock = threading.RLock()
        self._closed = False
        self._lost = False
        self.session_ok = threading.Event()

    # ------------------------------------------------------------ register
    def register(self) -> None:
        cfg, p = self.config, self.paths
        for path in (p.members(cfg.group), p.epochs(cfg.group), p.topics, p.routes,
                     p.consumer_groups):
            self.zk.ensure_path(path)
        self._clear_stale_self()
        self._claim_master()
        self.zk.create(p.member(cfg.group, cfg.broker_id), dumps(self.info()), ephemeral=True)
        self.session_ok.set()
        self.zk.add_listener(self._on_state)
        ChildrenWatch(self.zk, p.topics, self._on_topics)

    def _clear_stale_self(self) -> None:
        """A broker restarted after kill -9 finds the ephemeral nodes of its own
        dead session (they live until the session times out): remove them.
        Nodes of another broker id are never touched."""
        cfg, p = self.config, self.paths
        own_session = self.zk.client_id[0]
        for path in (p.master(cfg.group), p.member(cfg.group, cfg.broker_id)):
            try:
                raw, stat = self.zk.get(path)
            except NoNodeError:
                continue
            if loads(raw).get("broker_id") == cfg.broker_id and stat.ephemeralOwner != own_session:
                log.warning("removing %s left by a previous session of this broker", path)
                try:
                    self.zk.delete(path, version=stat.version)
                except NoNodeError:
                    pass

    def _claim_master(self) -> None:
        cfg, p = self.config, self.paths
        epochs = self.zk.get_children(p.epochs(cfg.group))
        last = max((int(e) for e in epochs if e.isdigit()), default=0)
        try:
            raw, _ = self.zk.get(p.master(cfg.group))
            holder = loads(raw)
            if holder.get("broker_id") != cfg.broker_id:
                raise ConfigError(
                    f"broker group {cfg.group!r} already has a live master (broker "
                    f"{holder.get('broker_id')} at {holder.get('address')})")
        except NoNodeError:
            pass
        self.epoch = last + 1
        tx = self.zk.transaction()
        tx.create(p.epoch(cfg.group, self.epoch),
                  dumps({"broker_id": cfg.broker_id, "start_offset": self.max_offset()}))
        tx.create(p.master(cfg.group), dumps({"broker_id": cfg.broker_id, "epoch": self.epoch,
                                              "address": cfg.address}), ephemeral=True)
        results = tx.commit()
        for r in results:
            if isinstance(r, NodeExistsError):
                raise ConfigError(f"broker group {cfg.group!r} already has a live master")
            if isinstance(r, Exception):
                raise r
        log.info("master of %s at epoch %d", cfg.group, self.epoch)

    def info(self) -> dict:
        return {**self.member_info(), "epoch": self.epoch}

    def update_info(self) -> None:
        try:
            self.zk.set(self.paths.member(self.config.group, self.config.broker_id),
                        dumps(self.info()))
        except Exception:  # best effort: status only
            log.debug("member info update failed", exc_info=True)

    # ------------------------------------------------------------ topics and routes
    def _on_topics(self, children):
        if self._closed:
            return False
        for name in children:
            if name not in self._watched:
                self._watched.add(name)
                DataWatch(self.zk, self.paths.topic(name), self._topic_watcher(name))
        return True

    def _topic_watcher(self, name: str):
        # kazoo passes the event as a third argument to a callback that takes
        # three, so the name is bound by closure, not by a default argument
        return lambda data, stat: self._on_topic(name, data)

    def _on_topic(self, name: str, data):
        if self._closed:
            return False
        with self._lock:
            topics = dict(self.topics)
            configs = dict(self.topic_configs)
            if data is None:
                topics.pop(name, None)
                configs.pop(name, None)
                self._watched.discard(name)
                self._remove_route(name)
                self.topics, self.topic_configs = topics, configs
                return False
            cfg = TopicConfig.from_json(name, data)
            configs[name] = cfg
            n = cfg.queues.get(self.config.group, 0)
            if n:
                topics[name] = n
                self._publish_route(cfg, n)
            else:
                topics.pop(name, None)
                self._remove_route(name)
            self.topics, self.topic_configs = topics, configs
        return True

    def _publish_route(self, cfg: TopicConfig, queues: int) -> None:
        path = self.paths.route(cfg.name, self.config.group)
        data = dumps({"group": self.config.group, "address": self.config.address,
                      "broker_id": self.config.broker_id, "epoch": self.epoch,
                      "queues": queues, "perm": cfg.perm,
                      "max_ack_wait_ms": self.config.max_ack_wait_ms})
        try:
            self.zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            stat = self.zk.exists(path)
            if stat is not None and stat.ephemeralOwner != self.zk.client_id[0]:
                # left by a dead session of ours: it would vanish when that
                # session expires, taking the live route with it
                self.zk.delete(path)
                self.zk.create(path, data, ephemeral=True, makepath=True)
            else:
                self.zk.set(path, data)

    def _remove_route(self, name: str) -> None:
        try:
            self.zk.delete(self.paths.route(name, self.config.group))
        except NoNodeError:
            pass

    # ------------------------------------------------------------ session
    def _on_state(self, state):
        if state == KazooState.LOST:
            self._lost = True
            self.session_ok.clear()
            log.error("ZooKeeper session lost: registration gone until it is re-established")
        elif state == KazooState.SUSPENDED:
            self.session_ok.clear()
            log.warning("ZooKeeper connection suspended")
        elif state == KazooState.CONNECTED:
            if self._lost and not self._closed:
                self._lost = False
                self.zk.handler.spawn(self._reregister)
            else:
                self.session_ok.set()

    def _reregister(self):
        try:
            self._claim_master()
            self.zk.create(self.paths.member(self.config.group, self.config.broker_id),
                           dumps(self.info()), ephemeral=True)
            with self._lock:
                for name, cfg in self.topic_configs.items():
                    n = cfg.queues.get(self.config.group, 0)
                    if n:
                        self._publish_route(cfg, n)
            self.session_ok.set()
            log.info("re-registered in ZooKeeper after a session loss")
        except Exception:
            log.exception("re-registration failed")

    def close(self) -> None:
        self._closed = True
        p, cfg = self.paths, self.config
        for name in list(self.topics):
            self._remove_route(name)
        for path in (p.master(cfg.group), p.member(cfg.group, cfg.broker_id)):
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass
