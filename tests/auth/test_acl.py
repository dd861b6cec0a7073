"""Permissions, policies and what each request needs (pure)."""

import pytest

from duomq.auth.acl import (
    ADMIN,
    CHECKED,
    NEEDS,
    NOT_FROM_CLIENTS,
    Permission,
    Policy,
    needs,
    topic_read,
)
from duomq.common.errors import ConfigError
from duomq.common.names import INTERNAL_TOPICS
from duomq.proto import pb


def P(text):
    return Permission.parse(text)


@pytest.mark.parametrize("text, error", [
    ("Topic:Orders", "expected Type:Name:Action"),
    ("Queue:Orders:Pub", "type 'Queue'"),
    ("Topic:Orders:Write", "action 'Write' is not an action"),
    # accepted by earlier releases, never checked: refused when a user is added
    ("Topic:Orders:Create", "'Create' is never checked on a Topic: a Topic permission takes "
                            "Pub, Sub or All"),
    ("Cluster:c:List", "never checked on a Cluster"),
    ("Topic:Orders:Delete", "never checked on a Topic"),
    ("Group:g:Pub", "never checked on a Group"),
    ("Topic:../x:Pub", "is not a name"),
    ("Topic:Or*ders:Pub", "is not a name"),
])
def test_bad_permissions_are_named(text, error):
    with pytest.raises(ConfigError, match=error):
        P(text)


def test_matching_names_prefixes_and_all():
    assert P("Topic:Orders:Pub").covers(P("Topic:Orders:Pub"))
    assert not P("Topic:Orders:Pub").covers(P("Topic:Orders2:Pub"))
    assert P("Topic:Ord*:Pub").covers(P("Topic:Orders2:Pub"))
    assert P("Topic:*:All").covers(P("Topic:Anything:Sub"))
    assert not P("Topic:*:Sub").covers(P("Topic:Orders:Pub"))
    assert not P("Group:*:All").covers(P("Topic:Orders:Sub"))
    assert not P("Topic:*:All").covers(Permission("Topic", "%RETRY%g", "Sub"))  # reserved


def test_deny_wins_and_the_lacking_permission_is_named():
    pol = Policy.parse(["Topic:*:Pub", "Group:billing:Sub"], ["Topic:Secret*:Pub"])
    assert pol.lacking([P("Topic:Orders:Pub")]) is None
    assert pol.lacking([P("Topic:SecretPlans:Pub")]) == P("Topic:SecretPlans:Pub")
    assert pol.lacking([P("Topic:Orders:Sub"), P("Group:billing:Sub")]) == P("Topic:Orders:Sub")
    assert ADMIN.lacking([P("Cluster:c:Get"), P("Topic:x:Pub"), P("Group:g:Sub")]) is None


def test_what_requests_need():
    assert needs(pb.SEND, pb.SendRequest(topic="T"), "c") == [P("Topic:T:Pub")]
    assert needs(pb.PULL, pb.PullRequest(topic="T", consumer_group="G"), "c") == \
        [P("Topic:T:Sub"), P("Group:G:Sub")]
    # the group's own retry topic: the group's permission is enough
    assert needs(pb.PULL, pb.PullRequest(topic="%RETRY%G", consumer_group="G"), "c") == \
        [P("Group:G:Sub")]
    # several queues at once: what each would need, once
    many = pb.PullManyRequest(pulls=[pb.PullRequest(topic=t, consumer_group="G", queue_id=q)
                                     for t in ("T", "%RETRY%G", "U") for q in range(3)])
    assert needs(pb.PULL_MANY, many, "c") == [P("Topic:T:Sub"), P("Group:G:Sub"),
                                               P("Topic:U:Sub")]
    # the offsets of a topic: Sub on it; of the group's own retry topic: the group's
    assert needs(pb.QUERY_OFFSET, pb.QueryOffsetRequest(topic="T"), "c") == [P("Topic:T:Sub")]
    assert needs(pb.QUERY_OFFSET, pb.QueryOffsetRequest(topic="%RETRY%G", consumer_group="G"),
                 "c") == [P("Group:G:Sub")]
    assert needs(pb.QUERY_OFFSET, pb.QueryOffsetRequest(topic="%RETRY%H", consumer_group="G"),
                 "c") == [Permission("Topic", "%RETRY%H", "Sub"), P("Group:G:Sub")]
    commit = pb.CommitOffsetRequest(consumer_group="G", offsets=[
        pb.QueueOffset(topic="T", queue_id=0), pb.QueueOffset(topic="T", queue_id=1)])
    assert needs(pb.COMMIT_OFFSET, commit, "c") == [P("Topic:T:Sub"), P("Group:G:Sub")]
    assert needs(pb.BROKER_STATUS, pb.BrokerStatusRequest(), "prod") == [P("Cluster:prod:Get")]
    assert needs(pb.HEARTBEAT, pb.HeartbeatRequest(producer_groups=["P"]), "c") == []
    # a consumer's heartbeat: its groups (a master then makes their retry topics)
    assert needs(pb.HEARTBEAT, pb.HeartbeatRequest(consumer_groups=["G", "H", "G"]), "c") == \
        [P("Group:G:Sub"), P("Group:H:Sub")]
    assert needs(pb.SEND_BACK, pb.SendBackRequest(consumer_group="G"), "c") == [P("Group:G:Sub")]
    # ending a transaction: a producer's needs Pub on its topic, an operator's Admin
    assert needs(pb.END_TRANSACTION, pb.EndTransactionRequest(producer_group="pg", topic="T"),
                 "c") == [P("Topic:T:Pub")]
    assert needs(pb.END_TRANSACTION, pb.EndTransactionRequest(), "c") == [P("Cluster:c:Admin")]


def test_operators_requests_need_delete_and_admin():
    assert needs(pb.DELETE_GROUP, pb.DeleteGroupRequest(consumer_group="G"), "c") == \
        [P("Group:G:Delete")]
    assert needs(pb.BROKER_CONFIG, pb.BrokerConfigRequest(), "c") == [P("Cluster:c:Get")]
    assert needs(pb.BROKER_CONFIG, pb.BrokerConfigRequest(set={"max_pull_messages": "64"}),
                 "c") == [P("Cluster:c:Admin")]


def test_a_stored_policy_drops_entries_that_never_granted_anything():
    """A user added by an earlier release with ``Topic:Orders:Create``
    keeps the rest of its policy; a new one with it is refused."""
    pol = Policy.parse(["Topic:Orders:Create", "Topic:Orders:Pub"], ["Cluster:c:List"],
                       stored=True)
    assert pol.allow == (P("Topic:Orders:Pub"),) and pol.deny == ()
    with pytest.raises(ConfigError, match="never checked"):
        Policy.parse(["Topic:Orders:Create"])
    with pytest.raises(ConfigError, match="is not an action"):       # still refused: a typo
        Policy.parse(["Topic:Orders:Pubb"], stored=True)


def test_every_request_type_is_in_the_table_or_refused_as_no_clients():
    for value in pb.RequestType.values():
        if value == pb.REQUEST_TYPE_UNSPECIFIED:
            continue
        assert (value in NEEDS) != (value in NOT_FROM_CLIENTS), pb.RequestType.Name(value)
    assert needs(pb.HA_REPORT, pb.HaReport(), "c") is None
    assert needs(pb.CHECK_TRANSACTION_STATE, pb.CheckTransactionStateRequest(), "c") is None


def test_every_action_the_table_needs_can_be_granted_and_every_grantable_one_is_needed():
    """The actions a policy may name are exactly the ones some request
    checks (with the request fields that make it need each)."""
    samples = {
        pb.SEND: pb.SendRequest(topic="T"),
        pb.PULL: pb.PullRequest(topic="T", consumer_group="G"),
        pb.DELETE_GROUP: pb.DeleteGroupRequest(consumer_group="G"),
        pb.BROKER_STATUS: pb.BrokerStatusRequest(),
        pb.BROKER_CONFIG: pb.BrokerConfigRequest(set={"k": "v"}),
    }
    needed = {(p.type, p.action) for t, m in samples.items() for p in needs(t, m, "c")}
    assert needed == {(t, a) for t, actions in CHECKED.items() for a in actions}


RESERVED = [*sorted(INTERNAL_TOPICS), "%RETRY%other", "%DLQ%other"]
# every wildcard a hostile user could be granted, and the admin's own
WILDCARDS = {
    "admin": ADMIN,
    "everything": Policy.parse(["Topic:*:All", "Group:*:All", "Cluster:*:All"]),
    "prefixes": Policy.parse([f"Topic:{c}*:All" for c in "RSDTUVWXYZ"]
                             + ["Group:*:All", "Cluster:*:Get"]),
    "subs": Policy.parse(["Topic:R*:Sub", "Topic:S*:Sub", "Group:mine:Sub"]),
}


def naming(type_: int, topic: str) -> list:
    """Requests of ``type_`` naming ``topic``, in group ``mine``."""
    q = pb.QueueOffset(topic=topic, queue_id=0, offset=0)
    pull = pb.PullRequest(consumer_group="mine", topic=topic, queue_id=0)
    return {
        pb.SEND: [pb.SendRequest(topic=topic)],
        pb.PULL: [pull],
        pb.PULL_MANY: [pb.PullManyRequest(pulls=[pull])],
        pb.QUERY_OFFSET: [pb.QueryOffsetRequest(topic=topic),
                          pb.QueryOffsetRequest(topic=topic, consumer_group="mine")],
        pb.QUERY_BY_KEY: [pb.QueryByKeyRequest(topic=topic, key="k")],
        pb.COMMIT_OFFSET: [pb.CommitOffsetRequest(consumer_group="mine", offsets=[q])],
        pb.FETCH_OFFSET: [pb.FetchOffsetRequest(consumer_group="mine", queues=[q])],
        pb.LOCK_QUEUES: [pb.LockQueuesRequest(consumer_group="mine", queues=[
            pb.QueueRef(topic=topic, queue_id=0)])],
        pb.UNLOCK_QUEUES: [pb.LockQueuesRequest(consumer_group="mine", queues=[
            pb.QueueRef(topic=topic, queue_id=0)])],
        pb.END_TRANSACTION: [pb.EndTransactionRequest(producer_group="p", topic=topic)],
        pb.POP: [pb.PopRequest(consumer_group="mine", topic=topic)],
        pb.SHARE_ACK: [pb.ShareAckRequest(consumer_group="mine", topic=topic)],
        pb.RECALL: [pb.RecallRequest(topic=topic)],
    }.get(type_, [])


@pytest.mark.parametrize("policy", WILDCARDS, ids=list(WILDCARDS))
@pytest.mark.parametrize("topic", RESERVED)
def test_no_policy_reaches_a_reserved_topic_by_any_request(policy, topic):
    """Every request type that names a topic, and the reads of a stored
    message (a send back, a read by offset), against the broker's own topics
    and another group's retry and dead-letter topics: refused under every
    wildcard policy, the admin's included."""
    pol = WILDCARDS[policy]
    named = 0
    for type_ in NEEDS:
        for m in naming(type_, topic):
            named += 1
            assert pol.lacking(needs(type_, m, "c")) is not None, (policy, topic, type_)
    assert named == 14
    assert pol.lacking(topic_read(topic, None)) is not None
    assert pol.lacking(topic_read(topic, "mine")) is not None


def test_a_group_reads_its_own_retry_and_dead_letter_topics_with_the_group_alone():
    pol = Policy.parse(["Group:mine:Sub"])
    for topic in ("%RETRY%mine", "%DLQ%mine"):
        assert pol.lacking(needs(pb.PULL, pb.PullRequest(topic=topic, consumer_group="mine"),
                                 "c")) is None
        assert pol.lacking(topic_read(topic, "mine")) is None
        assert pol.lacking(needs(pb.SEND, pb.SendRequest(topic=topic), "c")) is not None


@pytest.mark.parametrize("text", ["Topic:SCHEDULE_TOPIC_XXXX:Sub", "Topic:%DLQ%*:Sub",
                                  "Topic:%RETRY%billing:All", "Topic:RMQ_SYS_TRANS_HALF_TOPIC:Pub"])
def test_a_policy_naming_a_reserved_topic_is_refused_and_a_stored_one_loses_it(text):
    with pytest.raises(ConfigError, match="which no policy grants"):
        P(text)
    pol = Policy.parse([text, "Topic:Orders:Sub"], stored=True)
    assert pol.allow == (P("Topic:Orders:Sub"),)
