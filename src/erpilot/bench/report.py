"""The tables `erpilot bench` prints (Markdown, so they paste into docs/PERFORMANCE.md as they are). Pure."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from erpilot.bench.stats import ratio

ROLES = ("gateway", "agent", "approval", "erp", "nats", "postgres")


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def get(d: dict, *path):
    """d[path[0]][path[1]]…, or None where a key is missing."""
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(cell) if not isinstance(cell, str) else cell for cell in row) + " |"
              for row in rows]
    return lines


def _pct(stage: dict | None) -> str:
    if not stage:
        return "–"
    return f"{fmt(stage.get('p50_ms'))} / {fmt(stage.get('p90_ms'))} / {fmt(stage.get('p99_ms'))}"


def _streams(per_stream: dict | None) -> str:
    """"12.0: ERPILOT_COMMANDS 5.0, ERPILOT_EVENTS 3.0, …" (streams that stored nothing left out)."""
    if not per_stream:
        return "–"
    parts = ", ".join(f"{name} {fmt(n)}" for name, n in sorted(per_stream.items()) if n)
    return f"{fmt(float(sum(per_stream.values())))}: {parts}"


LEVEL_ROWS: list[tuple[str, Callable[[dict], object]]] = [
    ("cycles/s (draft included)", lambda r: r["cycles_per_s"]),
    ("cycles measured / failed", lambda r: f"{r['cycles']} / {r['failures']}"),
    ("request → approval_pending ms p50/p90/p99", lambda r: _pct(get(r, "stages", "request_to_pending"))),
    ("decision → tool_finished ms p50/p90/p99", lambda r: _pct(get(r, "stages", "decision_to_finished"))),
    ("draft (create_order_draft) ms p50/p90/p99", lambda r: _pct(get(r, "stages", "draft"))),
    ("whole cycle ms p50/p90/p99", lambda r: _pct(get(r, "stages", "cycle"))),
    ("read tool call get_product ms p50/p90/p99", lambda r: _pct(get(r, "reads", "tool_call"))),
    ("direct GET /v1/erp/products/{sku} ms p50/p90/p99", lambda r: _pct(get(r, "reads", "direct_get"))),
    ("CPU ms per cycle, all product processes", lambda r: get(r, "cpu_ms", "total")),
    *[(f"  … {role}", partial(lambda role, r: get(r, "cpu_ms", role), role)) for role in ROLES],
    ("CPU ms per cycle, less the idle stack's rate", lambda r: get(r, "net_of_idle", "cpu_ms")),
    ("CPU ms per read tool call, all product processes", lambda r: get(r, "reads", "cpu_ms", "total")),
    ("bench client CPU ms per cycle (not counted)", lambda r: r.get("client_cpu_ms")),
    ("machine busy (share of all cores)", lambda r: r.get("machine_busy")),
    ("database commits per cycle", lambda r: r.get("commits")),
    ("database commits per cycle, less the idle stack's rate", lambda r: get(r, "net_of_idle", "commits")),
    ("write transactions (xids) per cycle", lambda r: r.get("write_xacts")),
    ("database rollbacks per cycle", lambda r: r.get("rollbacks")),
    ("commits / write transactions per read", lambda r: f"{fmt(get(r, 'reads', 'commits'))} / "
                                                        f"{fmt(get(r, 'reads', 'write_xacts'))}"),
    ("JetStream messages stored per cycle, by stream", lambda r: _streams(r.get("jetstream_messages"))),
    ("JetStream messages stored per read", lambda r: _streams(get(r, "reads", "jetstream_messages"))),
    ("peak RSS MB, sum of VmHWM", lambda r: get(r, "memory", "total", "rss_peak_mb")),
    ("peak PSS MB, sampled", lambda r: get(r, "memory", "total", "pss_peak_mb")),
]


def level_table(result: dict) -> list[str]:
    levels = result["levels"]
    header = ["figure"] + [f"{r['concurrency']} in flight" for r in levels]
    return table(header, [[name] + [getter(r) for r in levels] for name, getter in LEVEL_ROWS])


def idle_lines(result: dict) -> list[str]:
    idle = result["idle_per_second"]
    cpu = idle["cpu_ms"]
    roles = ", ".join(f"{role} {fmt(cpu.get(role))}" for role in ROLES)
    memory = idle["memory"]["total"]
    return [f"idle stack: {fmt(cpu['total'] / 1000)} core ({roles} ms/s), {fmt(idle['commits'])} commits/s, "
            f"{fmt(idle['write_xacts'])} write transactions/s, PSS {fmt(memory['pss_peak_mb'])} MB "
            f"(RSS {fmt(memory['rss_peak_mb'])} MB, {memory['processes']} processes)"]


PEER_ROWS: list[tuple[str, Callable[[dict], object], Callable[[dict], object], str]] = [
    # figure, ours, the peer's, which way is better
    ("cycles/s", lambda r: r["cycles_per_s"], lambda p: p["cycles_per_s"], "higher"),
    ("request → approval_pending p50 ms (peer: start → interrupt)",
     lambda r: get(r, "stages", "request_to_pending", "p50_ms"), lambda p: get(p, "start_to_interrupt", "p50_ms"),
     "lower"),
    ("decision → tool_finished p50 ms (peer: resume → committed)",
     lambda r: get(r, "stages", "decision_to_finished", "p50_ms"), lambda p: get(p, "resume_to_committed", "p50_ms"),
     "lower"),
    ("CPU ms per cycle (product processes; peer: itself + PostgreSQL)", lambda r: get(r, "cpu_ms", "total"),
     lambda p: get(p, "cpu_ms", "total"), "lower"),
    ("  … PostgreSQL", lambda r: get(r, "cpu_ms", "postgres"), lambda p: get(p, "cpu_ms", "postgres"), "lower"),
    ("database commits per cycle", lambda r: r.get("commits"), lambda p: p.get("commits"), "lower"),
    ("write transactions per cycle", lambda r: r.get("write_xacts"), lambda p: p.get("write_xacts"), "lower"),
    ("peak PSS MB", lambda r: get(r, "memory", "total", "pss_peak_mb"), lambda p: get(p, "memory", "total",
                                                                                       "pss_peak_mb"), "lower"),
]


def peer_table(result: dict) -> list[str]:
    """Erpilot beside the peer per level, with the ratio Erpilot ÷ peer."""
    peers = {p["concurrency"]: p for p in result["peer"]["levels"]}
    rows = []
    for level in result["levels"]:
        peer = peers.get(level["concurrency"])
        if peer is None:
            continue
        for name, ours, theirs, better in PEER_ROWS:
            a, b = ours(level), theirs(peer)
            rows.append([f"{level['concurrency']} in flight: {name}", a, b, ratio(a, b), better])
    return table(["figure", "Erpilot", "peer (LangGraph)", "Erpilot ÷ peer", "better"], rows)


def peer_notes(result: dict) -> list[str]:
    peer = result["peer"]
    versions = ", ".join(f"{k} {v}" for k, v in peer.get("versions", {}).items() if v)
    return [f"peer: {versions}; synchronous_commit={peer.get('synchronous_commit')}; "
            f"exactly once: {get(peer, 'verify', 'exactly_once')}; double resume ran execute "
            f"{get(peer, 'duplicate_resume_probe', 'execute_node_runs')}× for "
            f"{get(peer, 'duplicate_resume_probe', 'threads')} threads"]


def render(result: dict) -> str:
    lines = level_table(result) + [""] + idle_lines(result)
    for level in result["levels"]:
        if level.get("first_failure"):
            lines.append(f"{level['concurrency']} in flight, first failure: {level['first_failure']}")
    if "peer" in result:
        lines += ["", *peer_table(result), "", *peer_notes(result)]
    machine = result.get("machine") or {}
    if machine:
        lines.append(f"machine: {machine.get('cpus')} × {machine.get('cpu_model')}, Linux {machine.get('kernel')}, "
                     f"Python {machine.get('python')}")
    return "\n".join(lines)
