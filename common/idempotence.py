"""Idempotent sends (pure): what the first record of an idempotent
producer's batch carries, so that a broker stores the batch once however
often it is retried (``store/producer_state.py``). The record has
``FLAG_SEQUENCED`` set in its header; these properties name the producer
(a 63-bit id, hex), the batch's sequence on its queue and how many records
it holds. Consumers never see them (``decode_records`` drops them)."""

from __future__ import annotations

PRODUCER_ID = "PRODUCER_ID"
SEQUENCE = "PRODUCER_SEQ"
BATCH_COUNT = "PRODUCER_BATCH"
SEQUENCING = (PRODUCER_ID, SEQUENCE, BATCH_COUNT)
MAX_PRODUCER_ID = (1 << 63) - 1


def sequencing(pid: int, seq: int, count: int) -> dict[str, str]:
    return {PRODUCER_ID: f"{pid:x}", SEQUENCE: str(seq), BATCH_COUNT: str(count)}


def sequence_of(props: dict[str, str]) -> tuple[int, int, int]:
    """``(producer id, sequence, count)`` of a flagged record; ValueError
    when its properties do not say them."""
    try:
        pid, seq, count = int(props[PRODUCER_ID], 16), int(props[SEQUENCE]), \
            int(props[BATCH_COUNT])
    except (KeyError, ValueError):
        raise ValueError(f"a sequenced record needs {', '.join(SEQUENCING)}: got "
                         f"{ {k: props.get(k) for k in SEQUENCING} }") from None
    if not 0 <= pid <= MAX_PRODUCER_ID or seq < 0 or count <= 0:
        raise ValueError(f"producer id {pid}, sequence {seq} or count {count} out of range")
    return pid, seq, count
