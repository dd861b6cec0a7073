"""``duomq drill run --scenario NAME``: a failover drill against a cluster.

Its own verified load (producers journaling every outcome, a consumer group
reading along), a fault per round with its heal, then an audit that reads
every queue back and a checker: attempted, acked (full, degraded), lost,
unexpected, duplicated, recovered, RTO per round, split brain. Exit code 0
only when the run's guarantees held."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

from duomq.cli.common import add_endpoint, endpoint
from duomq.common.endpoint import default_dev_dir


def add(sub) -> None:
    p = sub.add_parser("drill", help="failover drills: break a broker group, count what "
                                     "survived")
    dsub = p.add_subparsers(dest="drill_command", required=True)
    r = dsub.add_parser("run", help="run a scenario for some rounds and report")
    from duomq.drill.scenarios import NAMES
    r.add_argument("--scenario", required=True, choices=NAMES)
    r.add_argument("--rounds", type=int, default=3, help="faults to inject (3)")
    r.add_argument("--group", default="", help="broker group to break (default: the first)")
    r.add_argument("--driver", choices=["local", "container", "external"], default="local",
                   help="local: signals and iptables on this host's dev cluster (default); "
                        "container: podman kill, pause and iptables inside the containers "
                        "of the brokers and ZooKeeper servers; "
                        "external: inject faults yourself, the drill watches")
    r.add_argument("--data-dir", help="the dev cluster's directory (local driver; default "
                                      "$DUOMQ_DEV_DIR or ~/.duomq/dev)")
    r.add_argument("--topic", default="DrillTopic")
    r.add_argument("--producers", type=int, default=2)
    r.add_argument("--consumers", type=int, default=1,
                   help="consumers reading along (1); with --consumer share, reader processes")
    r.add_argument("--consumer", choices=["group", "share"], default="group",
                   help="group: PushConsumers of a consumer group (default); share: "
                        "SimpleConsumer processes of a share group, every stored message "
                        "checked acked exactly once or dead-lettered (scenario kill-consumer "
                        "kills one)")
    r.add_argument("--ordered", action="store_true",
                   help="each producer keeps one queue; check per-queue order")
    r.add_argument("--load", choices=["plain", "mixed"], default="plain",
                   help="mixed: beside --producers plain ones, a producer of delayed messages "
                        "(level 1), one of timer messages (0.3-3 s ahead) and a transactional "
                        "one (each committed), all checked alike (a timer once due; timers "
                        "lost and fired twice are counted; one fired twice does not fail)")
    r.add_argument("--seed", type=int, default=None,
                   help="the random schedule's seed (default: drawn and printed, to replay "
                        "a failing run)")
    r.add_argument("--duration", type=float, default=None,
                   help="how long zookeeper-outage (10 s) and zookeeper-session-expiry (17 s) "
                        "hold their fault; a random schedule draws up to it")
    r.add_argument("--recovery-timeout", type=float, default=60.0,
                   help="longest wait for writes to come back after a fault (s)")
    r.add_argument("--fault-timeout", type=float, default=600.0,
                   help="external driver: longest wait for each fault you inject (s)")
    r.add_argument("--report", help="write the JSON report here")
    r.add_argument("--plot", help="write a plot here (.png or .html)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    add_endpoint(r)
    r.set_defaults(func=run)


def run(args) -> int:
    from duomq.drill import report as rp
    from duomq.drill.faults import DrillError, ExternalDriver, LocalDriver
    from duomq.drill.runner import DrillSettings
    from duomq.drill.runner import run as run_drill
    if args.rounds < 1:
        raise DrillError("--rounds: at least one")
    if args.duration is not None and args.duration <= 0:
        raise DrillError("--duration: seconds, more than 0")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    import logging
    # the drill breaks brokers on purpose: the clients' warnings about it
    # (failed pulls, abandoned requests) would bury the progress line
    logging.getLogger("duomq.client").setLevel(logging.ERROR)
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)   # dropped connections: ours
    zookeeper, cluster = endpoint(args)
    tag = f"{int(time.time())}-{os.getpid()}"       # names what this run sets up
    driver: Any
    if args.driver == "local":
        driver = LocalDriver(args.data_dir or default_dev_dir(), zookeeper, tag)
    elif args.driver == "container":
        from duomq.drill.container_driver import ContainerDriver
        driver = ContainerDriver(zookeeper, tag)
    else:
        driver = ExternalDriver()
    settings = DrillSettings(args.scenario, args.rounds, group=args.group, topic=args.topic,
                             producers=args.producers, consumers=args.consumers,
                             consumer=args.consumer,
                             ordered=args.ordered, load=args.load, seed=seed,
                             duration_s=args.duration,
                             recovery_timeout_s=args.recovery_timeout,
                             fault_timeout_s=args.fault_timeout)
    import signal
    # a drill stopped by SIGTERM still heals: its iptables rules and cgroups go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    show = _Progress(sys.stderr)
    sys.stderr.write(f"drill {args.scenario}: seed {seed} (replay with --seed {seed})\n")
    result = run_drill(settings, zookeeper, cluster, driver, show)
    show.done()
    report = result.report
    if args.report:
        rp.write_json(report, args.report, result.timeline)
    if args.plot:
        rp.plot(result.ops, result.timeline, args.plot,
                f"duomq drill {args.scenario}: {report.rounds} round(s), {report.verdict}",
                result.t0)
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        print(rp.summary(report))
    return 0 if report.guarantees_held else 1


class _Progress:
    """One line, rewritten in place on a terminal (a line per phase otherwise)."""

    def __init__(self, out):
        self.out = out
        self.tty = out.isatty()
        self.last_phase = ""

    def __call__(self, p: dict) -> None:
        done = p["round"]
        bar = "#" * done + "." * max(0, p["rounds"] - done)
        line = (f"[{bar}] round {min(done + 1, p['rounds'])}/{p['rounds']} {p['phase']:<11} "
                f"{p['acks_per_s']:>5} acks/s  {p['attempted']} sent  "
                f"{p.get('fault') or p.get('heal') or ''}")
        if self.tty:
            self.out.write("\r" + line[:150].ljust(150))
        elif p["phase"] != self.last_phase:
            self.out.write(line + "\n")
        self.last_phase = p["phase"]
        self.out.flush()

    def done(self) -> None:
        if self.tty:
            self.out.write("\n")
