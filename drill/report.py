"""What a person reads after a drill: the JSON report, a summary table and
a plot of acks per second by outcome, with faults, heals and elections
marked (matplotlib, imported only for ``--plot``)."""

from __future__ import annotations

import json
import statistics

from duomq.drill.checker import Report

OUTCOMES = ("ok", "degraded", "stored", "failed", "unknown")
COLORS = {"ok": "tab:green", "degraded": "tab:olive", "stored": "tab:orange",
          "failed": "tab:red", "unknown": "tab:gray"}


def write_json(report: Report, path: str, timeline) -> None:
    data = report.as_dict()
    data["timeline"] = [{"t_s": round(t, 3), "event": e} for t, e in timeline]
    with open(path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


def rto_summary(rtos: list) -> dict:
    done = sorted(t for t in rtos if t is not None)
    if not done:
        return {"p50": None, "p99": None, "max": None}
    k99 = min(len(done) - 1, round(0.99 * (len(done) - 1)))
    return {"p50": round(statistics.median(done), 3), "p99": done[k99], "max": done[-1]}


def summary(report: Report) -> str:
    r = report
    rto = rto_summary(r.rto_s)
    rows = [
        ("scenario", r.scenario), ("rounds", r.rounds), ("attempted", r.attempted),
        ("acked", r.acked), ("acked_degraded", r.acked_degraded),
        ("stored, not durable", r.stored_not_durable), ("failed", r.failed),
        ("unknown", r.unknown), ("lost", r.lost),
        ("acked, unreadable under a fault", r.unreadable_under_fault),
        ("unexpected", r.unexpected),
        ("duplicated", r.duplicated), ("recovered", r.recovered),
        *([("timers acked/lost/fired twice",
            f"{r.timers_acked} / {r.timers_lost} / {r.timers_fired_twice}")]
          if r.timers_acked else []),
        ("longest gap without an ack (s)", r.longest_gap_s),
        ("acked, cut from a broker's log", "not read" if r.truncated_acked < 0
         else r.truncated_acked),
        ("order violations", r.order_violations),
        ("message ids naming two messages", r.id_conflicts),
        ("non-duomq exceptions", ", ".join(f"{k} {v}" for k, v in sorted(
            r.foreign_errors.items())) or 0),
        ("RTO p50 / p99 / max (s)", f"{rto['p50']} / {rto['p99']} / {rto['max']}"),
        ("split brain (s)", r.split_brain_s), ("verdict", r.verdict),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if r.notes.get("async"):
        lines.append(f"note: {r.notes['async']}")
    share = r.notes.get("share")
    if share:
        lines.append(f"share group: {share['delivered']} delivered, {share['acked']} acked, "
                     f"{share['redeliveries']} redelivered, {share['dead_lettered']} "
                     f"dead-lettered, {share['acks_refused']} late acks refused, "
                     f"{share['acks_unknown']} acks unanswered, "
                     f"{share.get('copies_acked', 0)} bodies stored twice (re-writes) acked "
                     f"once each; acked twice "
                     f"{share['acked_twice']}, delivered after an ack "
                     f"{share['delivered_after_ack']}, unaccounted {share['unaccounted']} "
                     f"({share['readers']} readers, {share['readers_killed']} killed)")
    lines.append("")
    if r.notes.get("seed") is not None:
        lines.append(f"seed {r.notes['seed']} (replay: --seed {r.notes['seed']})")
    lines.append("")
    lines.append(f"{'round':>5}  {'RTO s':>7}  {'elected s':>9}  {'gap s':>6}  fault")
    for pr in r.per_round:
        t = "-" if pr["rto_s"] is None else f"{pr['rto_s']:.2f}"
        e = pr.get("elected_after_s")
        gap = pr.get("longest_gap_s")
        lines.append(f"{pr['round']:>5}  {t:>7}  {'-' if e is None else f'{e:.2f}':>9}  "
                     f"{'-' if gap is None else f'{gap:.2f}':>6}  {pr['fault']}")
    return "\n".join(lines)


def plot(ops, timeline, path: str, title: str, t0: float) -> None:
    """Acks per second by outcome over the run, faults and heals as lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if not ops:
        raise ValueError("nothing was sent: nothing to plot")
    end = int(max(op.ended for op in ops) - t0) + 1
    series = {o: [0] * end for o in OUTCOMES}
    for op in ops:
        series[op.outcome][max(0, int(op.ended - t0))] += 1
    fig, ax = plt.subplots(figsize=(11, 4.5))
    xs = list(range(end))
    bottom = [0] * end
    for o in OUTCOMES:
        if any(series[o]):
            ax.bar(xs, series[o], bottom=bottom, width=1.0, align="edge", color=COLORS[o],
                   label=o)
            bottom = [a + b for a, b in zip(bottom, series[o], strict=True)]
    top = max(bottom) or 1
    for t, event in timeline:
        color = "tab:red" if not event.startswith(("heal", "epoch")) else \
            ("tab:blue" if event.startswith("heal") else "tab:purple")
        ax.axvline(t, color=color, linestyle="--", linewidth=1 if len(timeline) <= 24 else 0.5)
        if len(timeline) <= 24:        # many rounds: the lines alone, colour-coded
            ax.text(t, top * 1.02, event.split(":")[0], rotation=90, fontsize=7, color=color,
                    va="bottom", ha="right")
    ax.set_xlabel("seconds since the drill started")
    ax.set_ylabel("answers per second")
    ax.set_title(title + ("\nred: fault, purple: election, blue: heal"
                          if len(timeline) > 24 else ""), pad=40 if len(timeline) <= 24 else 8)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_ylim(0, top * 1.05)
    fig.tight_layout()
    if path.endswith(".html"):
        import base64
        import io
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        with open(path, "w") as f:
            f.write(f"<html><body><h3>{title}</h3><img src='data:image/png;base64,"
                    f"{base64.b64encode(buf.getvalue()).decode()}'></body></html>\n")
    else:
        fig.savefig(path, dpi=110)
    plt.close(fig)
