"""The share-group checker (pure): each violation it must find, and a clean
history with redeliveries, refused and unanswered acks that must pass."""

from duomq.drill.share_checker import Event, check_share


def ev(kind, body, n, reader=0, msg_id=""):
    return Event(kind, body, n, reader, msg_id)


CLEAN = [ev("d", b"a", 1), ev("a", b"a", 1),
         ev("d", b"b", 1, 1), ev("r", b"b", 1, 1), ev("d", b"b", 2), ev("a", b"b", 2),
         ev("d", b"c", 1), ev("u", b"c", 1),                  # unanswered: may be done
         ev("d", b"d", 1), ev("d", b"d", 2, 1),               # dead-lettered after 2
         ev("d", b"k", 1, 2), ev("i", b"k", 1, 2)]            # killed after sending its ack


def test_a_clean_history_passes_and_is_counted():
    figures, problems = check_share(CLEAN, {b"a", b"b", b"c", b"d", b"k"}, {b"d"})
    assert problems == []
    assert (figures["delivered"], figures["acked"], figures["redeliveries"],
            figures["acks_refused"], figures["acks_unknown"], figures["dead_lettered"]) == \
        (7, 2, 2, 1, 2, 1)
    # without the sent ack, k is unaccounted
    _, problems = check_share(CLEAN[:-1], {b"k"}, set())
    assert problems == ["1 stored message(s) never acked nor dead-lettered"]


def test_every_violation_is_found():
    bad = [ev("d", b"a", 1), ev("a", b"a", 1), ev("d", b"a", 2), ev("a", b"a", 2, 1),
           ev("d", b"e", 1), ev("a", b"e", 1)]
    figures, problems = check_share(bad, {b"a", b"e", b"lost"}, {b"e"})
    assert figures["acked_twice"] == 1
    assert figures["delivered_after_ack"] == 1
    assert figures["unaccounted"] == 1
    assert figures["acked_and_dead_lettered"] == 1
    assert len(problems) == 4
    # a delivery after the ack alone, without a second ack, is found too
    _, problems = check_share([ev("d", b"x", 1), ev("a", b"x", 1), ev("d", b"x", 2)],
                              {b"x"}, set())
    assert problems == ["1 message(s) delivered again after an ack succeeded"]


def test_a_body_stored_twice_is_two_messages_each_acked_once():
    """A timer moved again (or a transaction committed again) by the next
    master: two records of one body, two ids; one id acked twice is still
    found."""
    copies = [ev("d", b"t", 1, 0, "a:1"), ev("a", b"t", 1, 0, "a:1"),
              ev("d", b"t", 1, 1, "a:2"), ev("a", b"t", 1, 1, "a:2")]
    figures, problems = check_share(copies, {b"t"}, set())
    assert problems == [] and figures["copies_acked"] == 1 and figures["acked_twice"] == 0
    again = copies + [ev("d", b"t", 2, 2, "a:2"), ev("a", b"t", 2, 2, "a:2")]
    figures, problems = check_share(again, {b"t"}, set())
    assert figures["acked_twice"] == 1 and figures["delivered_after_ack"] == 1
    assert "1 message(s) acked twice by the share group" in problems
