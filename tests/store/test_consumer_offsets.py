"""Consumer offsets: a deleted group is forgotten on the master and, through
the change stream, on its slaves."""

from duomq.store.consumer_offsets import DELETED, ConsumerOffsetManager


def test_a_deleted_group_reaches_a_slave_as_tombstones(tmp_path):
    master = ConsumerOffsetManager(str(tmp_path / "m.json"))
    slave = ConsumerOffsetManager(str(tmp_path / "s.json"))
    for q in range(3):
        master.commit("gone", "T", q, 10 + q)
    master.commit("kept", "T", 0, 5)

    def replicate(since: int) -> int:
        version, changes = master.changes_since(since)
        for (group, topic, qid), off in changes:
            slave.commit(group, topic, qid, off)
        return version

    seen = replicate(0)
    assert slave.fetch("gone", "T", 2) == 12 and slave.has_group("gone")
    assert master.delete_group("gone") == 3 and master.delete_group("gone") == 0
    assert not master.has_group("gone") and master.groups() == 1
    _version, changes = master.changes_since(seen)
    assert sorted(changes) == [(("gone", "T", q), DELETED) for q in range(3)]
    replicate(seen)
    assert slave.fetch("gone", "T", 0) == -1 and not slave.has_group("gone")
    assert slave.fetch("kept", "T", 0) == 5
    master.persist()
    again = ConsumerOffsetManager(str(tmp_path / "m.json"))
    again.load()
    assert not again.has_group("gone") and again.fetch("kept", "T", 0) == 5
