"""A broker's presence in ZooKeeper: its member node (address, role, epoch,
offsets), a watch on the group's master node, and, while it is master, a
route node per topic it hosts. Follows topic changes through watches and
re-registers after a session loss. The role itself is decided by
``ha_controller.HaController``, whose thread publishes and removes the routes;
the member node's contents come from the broker (``member_info``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.common.errors import InvalidNameError
from duomq.common.names import validate_name
from duomq.coordinator.nodes import MasterNode, MemberNode, NodeError, RouteNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicConfig

log = logging.getLogger(__name__)


class BrokerRegistry:
    def __init__(self, zk, config, member_info: Callable[[], MemberNode]):
        self.zk = zk
        self.config = config
        self.paths = ZkPaths(config.cluster)
        self.member_info = member_info
        self.routes_epoch: int | None = None   # routes published as master of this epoch
        # can the master ack a write under its own rules right now (SYNC: enough
        # slaves in sync)? Routes say so, and producers prefer groups that can
        self.acks_now = True
        self.master: MasterNode | None = None  # the master node (any role), from a watch
        # topic -> queue count for this group; replaced whole, read by the serving thread
        self.topics: dict[str, int] = {}
        self.topic_configs: dict[str, TopicConfig] = {}
        self._watched: set[str] = set()
        self._lock = threading.RLock()
        self._closed = False
        self._lost = False
        self._route_watched: set[str] = set()   # topics whose route node has a watch

    # ------------------------------------------------------------ register
    def register(self) -> None:
        cfg, p = self.config, self.paths
        for path in (p.members(cfg.group), p.epochs(cfg.group), p.topics, p.routes,
                     p.consumer_groups):
            self.zk.ensure_path(path)
        self._clear_stale_self()
        self.zk.create(p.member(cfg.group, cfg.broker_id), self.member_info().to_bytes(),
                       ephemeral=True)
        self.zk.add_listener(self._on_state)
        DataWatch(self.zk, p.master(cfg.group), self._on_master)
        ChildrenWatch(self.zk, p.topics, self._on_topics)

    def _on_master(self, data, stat):
        if self._closed:
            return False
        try:
            self.master = MasterNode.from_bytes(data) if data else None
        except NodeError as exc:
            log.warning("ignoring the master node: %s", exc)
            self.master = None
        return True

    def master_address(self) -> str | None:
        return self.master.address if self.master else None

    def master_ha_address(self, epoch: int) -> str | None:
        """Where to follow the master of ``epoch`` from: None while the master
        node names no master, this broker, or a master of another epoch (a
        slave's link belongs to the epoch it was ordered to follow, after it
        cut its log for that epoch: a link of an older epoch never dials the
        next master, whose bytes the coming cut could remove)."""
        m = self.master
        if m is None or m.broker_id == self.config.broker_id or m.epoch != epoch:
            return None
        return m.ha_address or None

    def master_public_key(self) -> bytes:
        """The CURVE key the master serves with, from its member node (b"":
        unknown, or a master without auth)."""
        m = self.master
        if m is None or not m.known:
            return b""
        try:
            raw, _ = self.zk.get(self.paths.member(self.config.group, m.broker_id))
            key = MemberNode.from_bytes(raw, m.broker_id).public_key
        except (NoNodeError, NodeError):
            return b""
        return key.encode()

    def _clear_stale_self(self) -> None:
        """A broker restarted after kill -9 finds the ephemeral nodes of its own
        dead session (they live until the session times out): remove them.
        Nodes of another broker id are never touched."""
        cfg, p = self.config, self.paths
        own_session = self.zk.client_id[0]
        for path, parse in ((p.master(cfg.group), MasterNode.from_bytes),
                            (p.member(cfg.group, cfg.broker_id), MemberNode.from_bytes)):
            try:
                raw, stat = self.zk.get(path)
            except NoNodeError:
                continue
            try:
                holder = parse(raw).broker_id
            except NodeError:
                holder = None
            if holder == cfg.broker_id and stat.ephemeralOwner != own_session:
                log.warning("removing %s left by a previous session of this broker", path)
                try:
                    self.zk.delete(path, version=stat.version)
                except NoNodeError:
                    pass

    def publish_routes(self, epoch: int) -> None:
        """As the master of ``epoch``: publish a route for every topic this group hosts."""
        with self._lock:
            self.routes_epoch = epoch
            for _name, cfg in self.topic_configs.items():
                n = cfg.queues.get(self.config.group, 0)
                if n:
                    self._publish_route(cfg, n)

    def set_acks_now(self, acks: bool) -> None:
        """Publish whether this master can ack writes now (all its routes)."""
        with self._lock:
            if acks == self.acks_now:
                return
            self.acks_now = acks
            try:
                if self.routes_epoch is not None:
                    for _name, cfg in self.topic_configs.items():
                        n = cfg.queues.get(self.config.group, 0)
                        if n:
                            self._publish_route(cfg, n)
            except Exception:
                self.acks_now = not acks         # published again on the next cycle
                raise

    def remove_routes(self) -> None:
        with self._lock:
            self.routes_epoch = None
            for name in list(self.topics):
                try:
                    self._remove_route(name)
                except Exception:   # gone with a lost session anyway
                    pass

    def update_info(self) -> None:
        """Write this broker's member node; create it again if it is gone (a
        successor removed it, taking this broker for dead)."""
        path = self.paths.member(self.config.group, self.config.broker_id)
        try:
            try:
                self.zk.set(path, self.member_info().to_bytes())
            except NoNodeError:
                if self._closed or self._lost:
                    return
                self.zk.create(path, self.member_info().to_bytes(), ephemeral=True)
                log.warning("registered again: this broker's member node was gone")
        except Exception:  # best effort: status only
            log.debug("member info update failed", exc_info=True)

    # ------------------------------------------------------------ topics and routes
    def _on_topics(self, children):
        if self._closed:
            return False
        for name in children:
            if name not in self._watched:
                self._watched.add(name)
                try:      # a node anyone wrote: checked as a client's request would be
                    validate_name("topic", name, allow_system=True)
                except InvalidNameError as exc:
                    log.error("ignoring topic node %s: %s (no route is published for it)",
                              self.paths.topic(name[:200]), exc)
                    continue
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
            try:
                cfg = TopicConfig.from_bytes(name, data)
            except NodeError as exc:     # as if absent until someone repairs it
                log.error("ignoring topic node %s: %s", self.paths.topic(name), exc)
                topics.pop(name, None)
                configs.pop(name, None)
                self._remove_route(name)
                self.topics, self.topic_configs = topics, configs
                return True
            configs[name] = cfg
            n = cfg.queues.get(self.config.group, 0)
            if n:
                topics[name] = n
                if self.routes_epoch is not None:
                    self._publish_route(cfg, n)
            else:
                topics.pop(name, None)
                self._remove_route(name)
            self.topics, self.topic_configs = topics, configs
        return True

    def _publish_route(self, cfg: TopicConfig, queues: int) -> None:
        """Write this master's route of ``cfg`` (its ``routes_epoch``) and
        watch it. A route node another session holds is replaced only when
        it names an older epoch, or this broker at ours (left by a dead
        session of ours): a node of a later master is never touched. A
        master cut off ZooKeeper past its session, back on a new one, is
        deposed but does not know it yet: its topic watches fire again at
        once, and replacing the successor's route with its own, which the
        step-down then deleted or its death took along, left the group with
        no route until the next election (issue 68: a drill's producers
        acked nothing for 68 s)."""
        epoch = self.routes_epoch
        if epoch is None or self._lost:
            return
        path = self.paths.route(cfg.name, self.config.group)
        own = self.config
        data = RouteNode(own.group, own.address, queues, cfg.perm, epoch,
                         own.broker_id, own.max_ack_wait_ms, own.max_frame_bytes,
                         self.acks_now).to_bytes()
        for _ in range(3):             # (a node that goes between two calls: again)
            try:
                self.zk.create(path, data, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                pass
            try:
                raw, stat = self.zk.get(path)
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    self.zk.set(path, data, version=stat.version)
                    break
                if not self._replaceable(path, raw, epoch):
                    return
                # at once: between a delete and a create the old master's
                # route watch could write its own back
                tx = self.zk.transaction()
                tx.delete(path, version=stat.version)
                tx.create(path, data, ephemeral=True)
                if not any(isinstance(r, Exception) for r in tx.commit()):
                    break
            except (NoNodeError, BadVersionError):
                continue
        self._watch_route(cfg.name, path)

    def _replaceable(self, path: str, raw: bytes, epoch: int) -> bool:
        """Whether a route node another session holds may be replaced by this
        master of ``epoch``: it names an older epoch, or this broker."""
        try:
            node = RouteNode.from_bytes(raw)
        except NodeError:
            return True                # unreadable: any master repairs it
        if node.epoch < epoch or (node.epoch == epoch and node.broker_id == self.config.broker_id):
            return True
        log.info("%s names broker %d at epoch %d and this broker led epoch %d: left to "
                 "it (this broker is being deposed)", path, node.broker_id, node.epoch, epoch)
        return False

    def _ours(self, path: str) -> bool:
        """The route node at ``path`` is this session's, at this master's epoch."""
        try:
            raw, stat = self.zk.get(path)
            node = RouteNode.from_bytes(raw)
        except (NoNodeError, NodeError):
            return False
        return stat.ephemeralOwner == self.zk.client_id[0] and node.epoch == self.routes_epoch

    def _watch_route(self, name: str, path: str) -> None:
        """Publish the route of ``name`` again if its node goes or changes
        while this broker is master (one watch at a time per topic)."""
        if name in self._route_watched:
            return
        self._route_watched.add(name)

        def fired(event) -> None:
            self._route_watched.discard(name)
            if event.type == EventType.NONE or self._closed or self._lost \
                    or self.routes_epoch is None:     # (NONE: the session ended)
                return
            try:
                with self._lock:
                    cfg = self.topic_configs.get(name)
                    n = cfg.queues.get(self.config.group, 0) if cfg is not None else 0
                    m = self.master     # a repair: only while the master node names us
                    if cfg is None or not n or self.routes_epoch is None or m is None or \
                            (m.broker_id, m.epoch) != (self.config.broker_id, self.routes_epoch):
                        return
                    if event.type != EventType.DELETED and self._ours(path):
                        self._watch_route(name, path)   # our own write: watched again
                    else:
                        self._publish_route(cfg, n)
            except Exception:    # the next topic change publishes it
                log.warning("route of %s not published again", name, exc_info=True)

        try:
            self.zk.exists(path, watch=fired)
        except Exception:
            self._route_watched.discard(name)
            raise

    def _remove_route(self, name: str) -> None:
        """Delete this broker's route of ``name``: only a node its own
        session holds (a deposed master must not delete its successor's)."""
        path = self.paths.route(name, self.config.group)
        try:
            stat = self.zk.exists(path)
            if stat is not None and stat.ephemeralOwner == self.zk.client_id[0]:
                self.zk.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    # ------------------------------------------------------------ session
    def _on_state(self, state):
        """Re-create our nodes after a session loss (writes are fenced by the
        HA controller's lease, not here)."""
        if state == KazooState.LOST:
            # the master node went with the session: this broker is master no
            # more (its controller steps down), so nothing may publish its
            # routes again, not the topic watches that fire on the new session
            self.routes_epoch = None
            self._route_watched.clear()          # the session's watches went with it
            self._lost = True
            if self._closed:         # this broker's own stop closed it
                log.info("ZooKeeper session closed")
            else:
                log.error("ZooKeeper session lost: registration gone until it is "
                          "re-established")
        elif state == KazooState.CONNECTED and self._lost and not self._closed:
            self._lost = False
            self.zk.handler.spawn(self._reregister)

    def _reregister(self):
        try:
            self.zk.create(self.paths.member(self.config.group, self.config.broker_id),
                           self.member_info().to_bytes(), ephemeral=True)
            with self._lock:
                for _name, cfg in self.topic_configs.items():
                    n = cfg.queues.get(self.config.group, 0)
                    if n and self.routes_epoch is not None:
                        self._publish_route(cfg, n)
            log.info("re-registered in ZooKeeper after a session loss")
        except Exception:
            log.exception("re-registration failed")

    def close(self, master: bool) -> None:
        """Leave the group (``master``: give up the master node and routes too)."""
        self._closed = True
        p, cfg = self.paths, self.config
        paths = [p.member(cfg.group, cfg.broker_id)]
        if master:
            for name in list(self.topics):
                self._remove_route(name)
            paths.insert(0, p.master(cfg.group))
        for path in paths:
            for _ in range(3):   # a renewal may move the master node's version meanwhile
                try:       # only what this session holds: never a successor's master node
                    stat = self.zk.exists(path)
                    if stat is not None and stat.ephemeralOwner == self.zk.client_id[0]:
                        self.zk.delete(path, version=stat.version)
                    break
                except NoNodeError:
                    break
                except BadVersionError:
                    continue
