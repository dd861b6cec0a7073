"""Subscription expressions (`*`, `TagA || TagB`): parsing and matching."""

import pytest

from duomq.common.errors import BadRequestError
from duomq.common.subscription import parse
from duomq.format.record import tag_hash


@pytest.mark.parametrize("text", [None, "", "*", "  *  "])
def test_everything(text):
    sub = parse(text)
    assert sub.everything and sub.expression == "*" and sub.matches("any") and sub.matches("")


def test_tags_joined_by_or():
    sub = parse(" TagB||TagA ||  TagB ")
    assert sub.tags == {"TagA", "TagB"} and sub.expression == "TagA || TagB"
    assert sub.codes == {tag_hash(b"TagA"), tag_hash(b"TagB")}
    assert sub.matches("TagA") and not sub.matches("TagC") and not sub.matches("")
    assert parse(sub.expression) == sub          # what the client sends parses the same


@pytest.mark.parametrize("text,match", [("A ||", "empty tag"), ("|| A", "empty tag"),
                                        ("A || *", "not a tag"), ("A | B", "not a tag"),
                                        ("x" * 5000, "at most")])
def test_bad_expressions_name_the_problem(text, match):
    with pytest.raises(BadRequestError, match=match):
        parse(text)
