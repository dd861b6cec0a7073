"""The v2 protocol's generated modules, imported in one place: the official
``rocketmq-python-client`` package's (``rocketmq.grpc_protocol``)."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc as rpc

__all__ = ["d", "rpc", "s"]

SERVICE = "apache.rocketmq.v2.MessagingService"
