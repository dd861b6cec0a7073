"""Recall handles (pure): a handle gives back what made it; anything else
is refused with one clear error, never a traceback."""

import pytest

from duomq.common import recall_handle
from duomq.common.errors import BadRequestError

ID = "broker-a:0000000300000000000004D2"


def test_a_handle_gives_back_its_topic_id_and_time():
    h = recall_handle.make("Orders", ID, 1_800_000_000_123)
    assert recall_handle.parse(h) == ("Orders", ID, 1_800_000_000_123)
    assert h.isascii() and "=" not in h and "/" not in h and "+" not in h


@pytest.mark.parametrize("bad", ["", "x", "not a handle at all", "A" * 600, "////////",
                                 recall_handle.make("T", "not-an-id", 5),
                                 recall_handle.make("", ID, 5),
                                 recall_handle.make("T", ID, 0),
                                 recall_handle.make("T", ID, 5)[:-3]])
def test_garbage_is_refused_with_one_clear_error(bad):
    with pytest.raises(BadRequestError, match="is not a recall handle"):
        recall_handle.parse(bad)
