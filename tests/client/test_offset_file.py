"""The broadcasting consumer's local offset file."""

import json

import pytest

from duomq.client.consumer.offset_file import LocalOffsetStore, default_path
from duomq.common.client_config import ConsumerConfig
from duomq.common.errors import ConfigError, InvalidNameError
from duomq.common.message import MessageQueue

A0, B1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-b", 1)


def test_offsets_survive_a_new_store_and_files_are_replaced_whole(tmp_path):
    path = str(tmp_path / "c" / "g" / "host.json")
    s = LocalOffsetStore(path)
    assert s.committed(A0) == -1
    s.commit({A0: 5, B1: 7})
    s.commit({A0: 9})
    assert LocalOffsetStore(path).committed(A0) == 9 and LocalOffsetStore(path).committed(B1) == 7
    with open(path) as f:
        assert json.load(f) == {"offsets": {"T@broker-a@0": 9, "T@broker-b@1": 7}}
    assert not (tmp_path / "c" / "g" / "host.json.tmp").exists()


@pytest.mark.parametrize("text", ["{not json", '{"offsets": {"T@a@0": "x"}}', "[]"])
def test_a_damaged_file_is_refused_by_name(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="bad.json"):
        LocalOffsetStore(str(path))


def test_path_and_config():
    assert default_path("/x", "c", "g", "h").endswith("/x/c/g/h.json")
    with pytest.raises(ConfigError, match="message_model"):
        ConsumerConfig(message_model="fanout")
    with pytest.raises(InvalidNameError):
        ConsumerConfig(instance_name="a/b")
