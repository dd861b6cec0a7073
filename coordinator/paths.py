"""ZooKeeper paths of one cluster (pure)."""

from __future__ import annotations

from dataclasses import dataclass

ROOT = "/duomq"


@dataclass(frozen=True)
class ZkPaths:
    cluster: str

    @property
    def cluster_root(self) -> str:
        return f"{ROOT}/{self.cluster}"

    @property
    def brokers(self) -> str:
        return f"{self.cluster_root}/brokers"

    def broker_group(self, group: str) -> str:
        return f"{self.brokers}/{group}"

    def members(self, group: str) -> str:
        return f"{self.broker_group(group)}/members"

    def member(self, group: str, broker_id: int) -> str:
        return f"{self.members(group)}/{broker_id}"

    def master(self, group: str) -> str:
        return f"{self.broker_group(group)}/master"

    def isr(self, group: str) -> str:
        return f"{self.broker_group(group)}/isr"

    def switchover(self, group: str) -> str:
        return f"{self.broker_group(group)}/switchover"

    def epochs(self, group: str) -> str:
        return f"{self.broker_group(group)}/epochs"

    def epoch(self, group: str, epoch: int) -> str:
        return f"{self.epochs(group)}/{epoch:010d}"

    @property
    def topics(self) -> str:
        return f"{self.cluster_root}/topics"

    def topic(self, topic: str) -> str:
        return f"{self.topics}/{topic}"

    @property
    def routes(self) -> str:
        return f"{self.cluster_root}/routes"

    def topic_routes(self, topic: str) -> str:
        return f"{self.routes}/{topic}"

    def route(self, topic: str, group: str) -> str:
        return f"{self.topic_routes(topic)}/{group}"

    @property
    def consumer_groups(self) -> str:
        return f"{self.cluster_root}/groups"

    def consumer_group(self, group: str) -> str:
        """A consumer group's own node (a secured cluster's: ``GroupAccessNode``)."""
        return f"{self.consumer_groups}/{group}"

    def group_members(self, group: str) -> str:
        return f"{self.consumer_groups}/{group}/members"

    def group_member(self, group: str, client_id: str) -> str:
        return f"{self.group_members(group)}/{client_id}"

    def group_owners(self, group: str) -> str:
        """Ephemeral owner nodes of the group's queues (``queue_owners``)."""
        return f"{self.consumer_groups}/{group}/owners"

    def group_reset(self, group: str, topic: str) -> str:
        return f"{self.consumer_groups}/{group}/resets/{topic}"

    @property
    def auth_root(self) -> str:
        return f"{self.cluster_root}/auth"

    @property
    def auth_config(self) -> str:
        """Published by brokers with auth = true: that it is on, and their public key."""
        return f"{self.auth_root}/config"

    @property
    def auth_admins(self) -> str:
        """The ``duomq`` principal's digest ids during and after a rotation."""
        return f"{self.auth_root}/admins"

    @property
    def auth_users(self) -> str:
        return f"{self.auth_root}/users"

    def auth_user(self, name: str) -> str:
        return f"{self.auth_users}/{name}"
