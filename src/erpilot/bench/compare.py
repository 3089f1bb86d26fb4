"""Erpilot beside its peers in one table: the figures, the ratios Erpilot ÷ peer, and issue 31's targets. Pure.

``result`` is what ``run.run_bench`` returns: Erpilot's ``levels`` and idle windows, and ``peers`` (name ->
the shape ``peer`` normalises every peer to). A figure a side lacks is a dash, and a target whose figures
are missing gets no verdict (a dash, never a ✓).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from erpilot.bench.stats import ratio
from erpilot.bench.tables import ROLES, fmt, get, table

# What the stored messages are, by stream; a stream not named here is shown by its name.
STREAM_LABELS = {"ERPILOT_COMMANDS": "commands", "ERPILOT_EVENTS": "events", "ERPILOT_SESSIONS": "session events"}


@dataclass(frozen=True)
class Target:
    """``op`` ``limit`` on Erpilot's figure, or on Erpilot ÷ ``peer``'s figure when ``peer`` is set."""

    op: str  # ">=" or "<="
    limit: float
    peer: str | None = None

    def label(self) -> str:
        sign = "≥" if self.op == ">=" else "≤"
        return f"{sign} {self.limit:.1f}× {self.peer}" if self.peer else f"{sign} {self.limit:g}"

    def met(self, ours: float | None, theirs: dict[str, float | None]) -> bool | None:
        """None when a figure it needs is missing (or the peer's is 0: no ratio)."""
        if not _number(ours):
            return None
        if self.peer is None:
            value, limit = ours, self.limit
        else:
            peer = theirs.get(self.peer)
            if not _number(peer) or peer == 0:
                return None
            value, limit = ours, self.limit * peer  # ours ÷ peer ≥ k ⇔ ours ≥ k × peer (peer > 0)
        return value >= limit if self.op == ">=" else value <= limit


@dataclass
class Row:
    figure: str
    ours: float | None
    theirs: dict[str, float | None] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    ours_text: str | None = None  # shown instead of ``ours`` (which the targets still read)

    def verdicts(self) -> list[tuple[Target, bool | None]]:
        return [(target, target.met(self.ours, self.theirs)) for target in self.targets]


# Issue 31's targets, by (figure key, level); None: every level.
TARGETS: dict[tuple[str, int | None], list[Target]] = {
    ("cycles_per_s", 32): [Target(">=", 1.0, "DBOS"), Target(">=", 0.5, "LangGraph")],
    ("cycles_per_s", 1): [Target(">=", 0.6, "DBOS")],
    ("decision_p50", 1): [Target("<=", 2.0, "DBOS")],
    ("cpu_total", 32): [Target("<=", 40.0)],
    ("write_xacts", 1): [Target("<=", 10.0)],
    ("jetstream", None): [Target("<=", 6.0)],
    ("idle_pss", None): [Target("<=", 400.0)],
}


def targets_for(key: str, level: int | None) -> list[Target]:
    return TARGETS.get((key, level), []) + (TARGETS.get((key, None), []) if level is not None else [])


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def _level(side: dict, concurrency: int) -> dict:
    return next((lvl for lvl in side.get("levels", []) if lvl.get("concurrency") == concurrency), {})


def stored_messages(per_stream: dict[str, float] | None) -> tuple[float | None, str]:
    """(messages stored per cycle over every stream, "4.00 (commands 2.00, events 2.00)"); streams that stored
    nothing are left out, so session events appear only while they are stored in a stream."""
    if not per_stream:
        return None, "–"
    total = float(sum(n for n in per_stream.values() if _number(n)))
    parts = ", ".join(f"{STREAM_LABELS.get(name, name)} {fmt(float(n))}" for name, n in sorted(per_stream.items())
                      if _number(n) and n)
    return total, f"{fmt(total)} ({parts})" if parts else fmt(total)


def level_rows(result: dict, concurrency: int) -> list[Row]:
    """Erpilot's and every peer's figures at one level."""
    ours = _level(result, concurrency)
    peers = {name: _level(peer, concurrency) for name, peer in result.get("peers", {}).items()}

    def row(key: str, figure: str, mine, theirs_path: tuple) -> Row:
        return Row(f"{figure}, {concurrency} in flight", mine,
                   {name: get(level, *theirs_path) for name, level in peers.items()},
                   targets_for(key, concurrency))

    rows = [
        row("cycles_per_s", "cycles/s", ours.get("cycles_per_s"), ("cycles_per_s",)),
        row("decision_p50", "decision → tool_finished p50 ms (peers: resume → committed)",
            get(ours, "stages", "decision_to_finished", "p50_ms"), ("resume_to_committed", "p50_ms")),
        row("request_p50", "request → approval_pending p50 ms (peers: start → interrupt)",
            get(ours, "stages", "request_to_pending", "p50_ms"), ("start_to_interrupt", "p50_ms")),
        row("cpu_total", "CPU ms per cycle, all processes (peers: itself + its PostgreSQL)",
            get(ours, "cpu_ms", "total"), ("cpu_ms", "total")),
    ]
    for role in ROLES:
        rows.append(Row(f"  … {role}", get(ours, "cpu_ms", role),
                        {name: get(level, "cpu_ms", role) for name, level in peers.items()}))
    rows.append(Row("  … the peer's own process", None,
                    {name: get(level, "cpu_ms", "peer") for name, level in peers.items()}))
    rows.append(row("write_xacts", "write transactions per cycle", ours.get("write_xacts"), ("write_xacts",)))
    total, text = stored_messages(ours.get("jetstream_messages"))
    rows.append(Row(f"JetStream messages stored per cycle, {concurrency} in flight", total,
                    dict.fromkeys(peers), targets_for("jetstream", concurrency), ours_text=text))
    return rows


def idle_rows(result: dict) -> list[Row]:
    peers = dict.fromkeys(result.get("peers", {}))
    return [Row(f"idle PSS MB of the whole stack, {when}", get(result, key, "memory", "total", "pss_peak_mb"),
                dict(peers), targets_for("idle_pss", None))
            for key, when in (("idle_per_second", "just started"), ("idle_warm_per_second", "warm (after the levels)"))]


def comparison_rows(result: dict) -> list[Row]:
    rows = []
    for level in result.get("levels", []):
        rows += level_rows(result, level["concurrency"])
    return rows + idle_rows(result)


def verdict_text(verdicts: list[tuple[Target, bool | None]]) -> str:
    marks = {True: "✓", False: "✗", None: "–"}
    return "; ".join(f"{target.label()} {marks[met]}" for target, met in verdicts)


def compare_table(result: dict) -> list[str]:
    """Erpilot | each peer and Erpilot ÷ it | target, then how many targets were met."""
    names = list(result.get("peers", {}))
    header = ["figure", "Erpilot"] + [cell for name in names for cell in (name, f"Erpilot ÷ {name}")] + ["target"]
    rows = comparison_rows(result)
    lines_rows, met, judged = [], 0, 0
    for row in rows:
        cells: list = [row.figure, row.ours_text if row.ours_text is not None else row.ours]
        for name in names:
            cells += [row.theirs.get(name), ratio(row.ours, row.theirs.get(name))]
        verdicts = row.verdicts()
        met += sum(1 for _, ok in verdicts if ok)
        judged += sum(1 for _, ok in verdicts if ok is not None)
        lines_rows.append(cells + [verdict_text(verdicts)])
    total = sum(len(row.targets) for row in rows)
    # the blank line ends the Markdown table: a line right below it would be read as one more row
    return table(header, lines_rows) + ["", f"targets met: {met} of {total} ({total - judged} without a figure)"]


def peer_notes(result: dict) -> list[str]:
    """Which script each peer ran, its versions, and whether it executed every operation exactly once."""
    lines = []
    for name, peer in result.get("peers", {}).items():
        versions = ", ".join(f"{k} {v}" for k, v in peer.get("versions", {}).items() if v)
        lines.append(f"{name}: {peer.get('script')} ({versions}); exactly once: {peer.get('exactly_once')}; "
                     f"{peer.get('duplicate_probe')}")
    return lines
