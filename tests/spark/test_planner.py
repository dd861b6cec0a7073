"""The driver-side planner's handling of a topic that a subscribePattern
matches before its brokers serve it (pure: the client is a stand-in that
answers as a broker does in that window; the real window is a few ZooKeeper
round trips, too short to hit on purpose with real brokers)."""

import pytest

from duomq.client.spark import source
from duomq.client.spark.options import SourceOptions, nest
from duomq.common.errors import TopicNotExistError
from duomq.common.message import MessageQueue


class _Client:
    """Queues from the topics' configurations; a broker that has not loaded
    ``unserved`` yet answers TOPIC_NOT_EXIST for it."""

    def __init__(self, unserved: str):
        self.unserved = unserved

    def queues(self, topic):
        return [MessageQueue(topic, "broker-a", q) for q in range(2)]

    def max_offset(self, mq):
        if mq.topic == self.unserved:
            raise TopicNotExistError(f"topic {mq.topic!r} is not hosted by broker group 'broker-a'")
        return 10 + mq.queue_id

    def after_failure(self, exc, topic=None, group=None):
        return False


def planner(options, unserved, topics):
    p = source._Planner.__new__(source._Planner)
    p.opts = SourceOptions.parse(options, streaming=True)
    p.client = _Client(unserved)
    p.topics = lambda: topics
    return p


def test_a_pattern_skips_a_topic_not_served_yet():
    p = planner({"subscribePattern": "Ev.*"}, "EvC", ["EvA", "EvC"])
    assert p.latest() == {("EvA", "broker-a", 0): 10, ("EvA", "broker-a", 1): 11}


def test_a_named_topic_not_served_is_an_error():
    p = planner({"subscribe": "EvA,EvC"}, "EvC", ["EvA", "EvC"])
    with pytest.raises(TopicNotExistError, match="not hosted"):
        p.latest()


def test_a_queue_missing_from_one_trigger_keeps_its_offset():
    r = source.DuomqStreamReader({"subscribePattern": "Ev.*", "zookeeper": "x"})
    r._planner = planner({"subscribePattern": "Ev.*"}, "EvC", ["EvA", "EvC"])
    start = {("EvA", "broker-a", 0): 3, ("EvC", "broker-a", 0): 7}
    end = r.latestOffset(nest(start), None)
    assert end == nest({("EvA", "broker-a", 0): 10, ("EvA", "broker-a", 1): 11,
                        ("EvC", "broker-a", 0): 7})
