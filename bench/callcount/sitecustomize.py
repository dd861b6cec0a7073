"""bench/call_counts.py's hook: loaded by every Python process started with
this directory first on PYTHONPATH and DUOMQ_CALLCOUNT set (a file prefix).
A broker (``-m duomq broker``) or a bench role (``roles.py ROLE``) counts,
on every thread, each Python function called and each C function called
from Python (sys.setprofile), and writes at exit one line per (thread,
function): ``count<TAB>thread<TAB>file<TAB>function``, to
``$DUOMQ_CALLCOUNT.<role>.<pid>``. Any other process is left alone."""

import os
import sys


def _role() -> str | None:
    argv = sys.argv             # (under -m, argv[0] is "-m" until the module runs)
    if argv[:1] == ["-m"] and argv[1:2] == ["broker"]:
        return "broker"
    if argv and argv[0].endswith("roles.py") and len(argv) > 1:
        return argv[1]
    return None


def _install(prefix: str, role: str) -> None:
    import atexit
    import collections
    import threading

    counts: dict = collections.defaultdict(collections.Counter)
    names: dict = {}
    ident = threading.get_ident

    def prof(frame, event, arg):
        if event == "call":
            code = frame.f_code
            key = ("/".join(code.co_filename.rsplit("/", 2)[-2:]), code.co_name)
        elif event == "c_call":
            key = ("C", getattr(arg, "__qualname__", None) or str(arg))
        else:
            return
        me = ident()
        if me not in names:
            names[me] = threading.current_thread().name
        counts[me][key] += 1

    def dump():
        sys.setprofile(None)
        threading.setprofile(None)
        with open(f"{prefix}.{role}.{os.getpid()}", "w") as out:
            for me, counter in counts.items():
                for (where, func), n in counter.items():
                    out.write(f"{n}\t{names.get(me, me)}\t{where}\t{func}\n")

    sys.setprofile(prof)
    threading.setprofile(prof)
    atexit.register(dump)


if os.environ.get("DUOMQ_CALLCOUNT") and (_r := _role()) is not None:
    _install(os.environ["DUOMQ_CALLCOUNT"], _r)
