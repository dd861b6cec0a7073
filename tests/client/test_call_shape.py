"""One call shape for every client (issue 69, item 6): the group first,
everything else by keyword; the shapes of before fail at once (no
ZooKeeper is dialled) with a TypeError naming the new one; every error a
caller handles is importable from duomq.client."""

from __future__ import annotations

import inspect
import time

import pytest

import duomq.client as client
from duomq.common import errors

OLD_SHAPES = [
    ("Producer", ("127.0.0.1:2181", "DefaultCluster")),
    ("Producer", ("127.0.0.1:2181",)),
    ("PullConsumer", ("127.0.0.1:2181", "DefaultCluster", "audit")),
    ("PullConsumer", ("zk-0:2181,zk-1:2181/duomq",)),
    ("PushConsumer", ("billing", "Orders", print)),
    ("SimpleConsumer", ("workers", "Jobs")),
    ("TransactionProducer", ("payments", lambda m: None)),
]


@pytest.mark.parametrize("name,args", OLD_SHAPES, ids=[f"{n}{len(a)}" for n, a in OLD_SHAPES])
def test_an_old_call_shape_fails_at_once_naming_the_new_one(name, args):
    cls = getattr(client, name)
    t0 = time.monotonic()
    with pytest.raises(TypeError) as caught:
        cls(*args, zookeeper="127.0.0.1:1") if name != "Producer" or len(args) > 1 \
            else cls(*args)
    assert time.monotonic() - t0 < 0.5
    said = str(caught.value)
    assert f'{name}("group"' in said and "by keyword" in said or "looks like a ZooKeeper" in said
    assert "zookeeper=" in said, said


@pytest.mark.parametrize("name", ["Producer", "PullConsumer", "PushConsumer", "SimpleConsumer",
                                  "TransactionProducer"])
def test_every_client_takes_its_group_first_and_the_rest_by_keyword(name):
    params = list(inspect.signature(getattr(client, name)).parameters.values())
    assert params[0].name == "group"
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert params[1].kind is inspect.Parameter.VAR_POSITIONAL       # refused, with the shape
    assert all(p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
               for p in params[2:]), params


def test_every_error_a_caller_handles_is_importable_from_duomq_client():
    public = {n for n, v in vars(errors).items()
              if inspect.isclass(v) and issubclass(v, errors.DuomqError)}
    assert public <= set(client.__all__), public - set(client.__all__)
    for n in public:
        assert getattr(client, n) is getattr(errors, n)
    from duomq.client import DuomqError, TopicNotExistError  # noqa: F401 - the way users write it


@pytest.mark.parametrize("name,kwargs,needs", [
    ("PushConsumer", {"topic": "Orders"}, "on_message="),
    ("PushConsumer", {"on_message": print}, "topic="),
    ("SimpleConsumer", {}, "subscriptions="),
])
def test_a_keyword_a_client_needs_left_out_is_named(name, kwargs, needs):
    with pytest.raises(TypeError, match=f"{name} needs {needs}"):
        getattr(client, name)("g", zookeeper="127.0.0.1:1", **kwargs)
