"""Store volumes of the dev cluster: sizes parsed strictly, store files sized
to the volume unless the user set them (the mount itself runs in the drill's
chaos test, as root)."""

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.errors import ConfigError
from duomq.dev.volumes import parse_size, scaled_settings


@pytest.mark.parametrize("text,size", [("256M", 256 << 20), ("1G", 1 << 30), ("64MiB", 64 << 20),
                                       ("67108864", 64 << 20), ("512m", 512 << 20)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "12X", "-5M", "1.5G", "32M"])
def test_bad_or_too_small_sizes_are_refused(text):
    with pytest.raises(ConfigError, match="--store-size"):
        parse_size(text)


@pytest.mark.parametrize("size", [64 << 20, 256 << 20, 8 << 30, 1 << 40])
def test_scaled_files_fit_the_volume_and_make_a_valid_config(size, tmp_path):
    s = scaled_settings(size, {})
    cfg = BrokerConfig(data_dir=str(tmp_path), **s)
    index_file = cfg.index_slot_count * 4 + cfg.index_max_entries * 20
    assert cfg.segment_size_bytes + cfg.cq_entries_per_segment * 20 + index_file < size // 4


def test_what_the_user_set_wins():
    s = scaled_settings(256 << 20, {"segment_size_bytes": 8 << 20, "max_message_bytes": 1000})
    assert s["segment_size_bytes"] == 8 << 20 and s["max_message_bytes"] == 1000
