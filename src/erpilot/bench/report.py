"""The tables `erpilot bench` prints (Markdown, so they paste into docs/PERFORMANCE.md as they are). Pure."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from erpilot.bench.compare import compare_table, peer_notes
from erpilot.bench.tables import ROLES, fmt, get, table


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
    """The idle stack just started, and warm (after the levels) when that window was measured."""
    lines = []
    for key, when in (("idle_per_second", "idle stack"), ("idle_warm_per_second", "idle stack, warm")):
        if key not in result:
            continue
        idle = result[key]
        cpu = idle["cpu_ms"]
        roles = ", ".join(f"{role} {fmt(cpu.get(role))}" for role in ROLES)
        memory = idle["memory"]["total"]
        lines.append(f"{when}: {fmt(cpu['total'] / 1000)} core ({roles} ms/s), {fmt(idle['commits'])} commits/s, "
                     f"{fmt(idle['write_xacts'])} write transactions/s, PSS {fmt(memory['pss_peak_mb'])} MB "
                     f"(RSS {fmt(memory['rss_peak_mb'])} MB, {memory['processes']} processes)")
    return lines


def render(result: dict) -> str:
    lines = level_table(result) + [""] + idle_lines(result)
    for level in result["levels"]:
        if level.get("first_failure"):
            lines.append(f"{level['concurrency']} in flight, first failure: {level['first_failure']}")
    if "peers" in result:
        lines += ["", *compare_table(result), "", *peer_notes(result)]
    machine = result.get("machine") or {}
    if machine:
        lines.append(f"machine: {machine.get('cpus')} × {machine.get('cpu_model')}, Linux {machine.get('kernel')}, "
                     f"Python {machine.get('python')}")
    return "\n".join(lines)
