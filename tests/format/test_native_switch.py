"""The one switch between the C loops and the pure paths (format/native.py):
each module chooses once what it calls, and setting ``native.LOOPS`` (as the
hot_loops fixture does) makes every one of them choose again, so no test
that means to run the Python runs the C. No production module asks at a
call."""

import pathlib
import re

from duomq.broker import writes as broker_writes
from duomq.client.producer import producer
from duomq.common import message
from duomq.format import bulk_scan, native, seal
from duomq.store import bulk_dispatch, producer_state
from duomq.store import writes as store_writes

ROOT = pathlib.Path(__file__).parents[2]
# (module, name it calls, the C loop's function, what it calls without C)
CHOICES = [
    (producer, "_encode", "encode", native.declined),
    (store_writes, "_stage", "stage", native.declined),
    (message, "_decode", "decode", native.declined),
    (broker_writes, "_sequence", "sequence", native.declined),
    (producer_state, "_sequence", "sequence", native.declined),
    (bulk_dispatch, "_first_unsealed", "first_unsealed", native.declined),
    (bulk_dispatch, "_all_sealed", None, bulk_dispatch._all_sealed_numpy),
    (seal, "patch_and_seal", "seal", seal._patch_and_seal),
    (bulk_scan, "_check", "scan", bulk_scan._checked),
]


def test_setting_loops_makes_every_module_choose_again(c_loops, monkeypatch):
    for module, name, c_name, _pure in CHOICES:
        want = getattr(c_loops, c_name) if c_name else bulk_dispatch._all_sealed_c
        assert getattr(module, name) is want, f"{module.__name__}.{name}"
    assert bulk_scan.pays(1)
    monkeypatch.setattr(native, "LOOPS", None)
    for module, name, _c_name, pure in CHOICES:
        assert getattr(module, name) is pure, f"{module.__name__}.{name}"
    assert not bulk_scan.pays(1) and native.kind() == "numpy"
    monkeypatch.undo()
    assert producer._encode is c_loops.encode and native.kind() == "c"


def test_no_production_module_asks_for_the_loops_at_a_call():
    asked = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {"tests", "chaos_tests", "bench", "testing", "build", ".venv"} or \
                str(rel) in {"format/native.py", "format/crc.py"}:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"native\.LOOPS|\bLOOPS is (not )?None", line):
                asked.append(f"{rel}:{n}: {line.strip()}")
    assert not asked, "\n".join(asked)
