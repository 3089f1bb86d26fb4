"""`erpilot bench --peer`'s comparison: Erpilot beside LangGraph and DBOS, the ratios and issue 31's targets.

Every expected cell is worked by hand from the figures below (no stack, no timing).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from erpilot.bench.compare import Target, compare_table, stored_messages
from erpilot.bench.peer import normalize_dbos, shared_peers_dir
from erpilot.bench.report import render

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def erpilot_level(concurrency: int, cycles_per_s: float, decision_p50: float, cpu: dict, write_xacts: float,
                  streams: dict) -> dict:
    return {"concurrency": concurrency, "cycles": 64, "failures": 0, "cycles_per_s": cycles_per_s,
            "stages": {"request_to_pending": {"p50_ms": 30.0}, "decision_to_finished": {"p50_ms": decision_p50}},
            "cpu_ms": cpu, "write_xacts": write_xacts, "jetstream_messages": streams}


def peer_level(concurrency: int, cycles_per_s: float, cpu: dict | None = None, resume_p50: float | None = None,
               write_xacts: float | None = None) -> dict:
    return {"concurrency": concurrency, "cycles_per_s": cycles_per_s, "start_to_interrupt": {"p50_ms": 5.0},
            "resume_to_committed": {"p50_ms": resume_p50} if resume_p50 else {}, "cpu_ms": cpu or {},
            "write_xacts": write_xacts}


def a_result() -> dict:
    return {
        "levels": [
            erpilot_level(1, 20.0, 16.0, {"total": 60.0, "agent": 20.0, "postgres": 15.0}, 9.0,
                          {"ERPILOT_COMMANDS": 3.0, "ERPILOT_EVENTS": 2.0, "ERPILOT_SESSIONS": 0.0,
                           "ERPILOT_DEAD_LETTERS": 0.0}),
            erpilot_level(32, 60.0, 40.0, {"total": 45.0}, 11.0,
                          {"ERPILOT_COMMANDS": 3.0, "ERPILOT_EVENTS": 2.0, "ERPILOT_SESSIONS": 4.0}),
        ],
        "idle_per_second": {"memory": {"total": {"pss_peak_mb": 350.0}}},
        "peers": {
            "LangGraph": {"levels": [peer_level(1, 100.0, {"peer": 7.0, "postgres": 3.0, "total": 10.0}, 4.0, 12.0),
                                     peer_level(32, 100.0, {"total": 9.0})]},
            "DBOS": {"levels": [peer_level(1, 33.0, {"peer": 20.0, "postgres": 5.0, "total": 25.0}, 10.0),
                                peer_level(32, 50.0)]},
        },
    }


def test_the_table_has_erpilot_then_each_peer_with_its_ratio_then_the_target():
    lines = compare_table(a_result())
    assert lines[0] == "| figure | Erpilot | LangGraph | Erpilot ÷ LangGraph | DBOS | Erpilot ÷ DBOS | target |"
    assert "| cycles/s, 1 in flight | 20.0 | 100.0 | 0.20 | 33.0 | 0.61 | ≥ 0.6× DBOS ✓ |" in lines
    assert "| cycles/s, 32 in flight | 60.0 | 100.0 | 0.60 | 50.0 | 1.20 | ≥ 1.0× DBOS ✓; ≥ 0.5× LangGraph ✓ |" in lines
    assert ("| decision → tool_finished p50 ms (peers: resume → committed), 1 in flight | 16.0 | 4.00 | 4.00 | 10.0 "
            "| 1.60 | ≤ 2.0× DBOS ✓ |") in lines
    assert ("| request → approval_pending p50 ms (peers: start → interrupt), 1 in flight | 30.0 | 5.00 | 6.00 | 5.00 "
            "| 6.00 |  |") in lines


def test_cpu_is_given_per_process_and_in_all_with_the_peers_own_process_and_postgres():
    lines = compare_table(a_result())
    assert ("| CPU ms per cycle, all processes (peers: itself + its PostgreSQL), 1 in flight | 60.0 | 10.0 | 6.00 "
            "| 25.0 | 2.40 |  |") in lines
    assert "|   … postgres | 15.0 | 3.00 | 5.00 | 5.00 | 3.00 |  |" in lines
    assert "|   … agent | 20.0 | – | – | – | – |  |" in lines
    assert "|   … the peer's own process | – | 7.00 | – | 20.0 | – |  |" in lines
    # at 32 DBOS gave no CPU figure: a dash and no ratio, and the target is on Erpilot's own figure
    assert ("| CPU ms per cycle, all processes (peers: itself + its PostgreSQL), 32 in flight | 45.0 | 9.00 | 5.00 "
            "| – | – | ≤ 40 ✗ |") in lines


def test_write_transactions_messages_and_idle_memory_are_held_to_their_limits():
    lines = compare_table(a_result())
    assert "| write transactions per cycle, 1 in flight | 9.00 | 12.0 | 0.75 | – | – | ≤ 10 ✓ |" in lines
    assert "| write transactions per cycle, 32 in flight | 11.0 | – | – | – | – |  |" in lines  # target: at 1 only
    assert ("| JetStream messages stored per cycle, 1 in flight | 5.00 (commands 3.00, events 2.00) | – | – | – | – "
            "| ≤ 6 ✓ |") in lines
    assert ("| JetStream messages stored per cycle, 32 in flight | 9.00 (commands 3.00, events 2.00, session events "
            "4.00) | – | – | – | – | ≤ 6 ✗ |") in lines
    assert "| idle PSS MB of the whole stack, just started | 350.0 | – | – | – | – | ≤ 400 ✓ |" in lines
    # the warm window was not measured: no figure, no verdict
    assert "| idle PSS MB of the whole stack, warm (after the levels) | – | – | – | – | – | ≤ 400 – |" in lines
    assert lines[-2:] == ["", "targets met: 7 of 10 (1 without a figure)"]


def test_a_target_on_a_ratio_needs_both_figures_and_compares_against_the_peer_times_the_factor():
    at_least_half = Target(">=", 0.5, "LangGraph")
    assert at_least_half.met(50.0, {"LangGraph": 100.0}) is True
    assert at_least_half.met(49.9, {"LangGraph": 100.0}) is False
    assert at_least_half.met(50.0, {"LangGraph": None}) is None
    assert at_least_half.met(50.0, {"LangGraph": 0.0}) is None
    assert at_least_half.met(None, {"LangGraph": 100.0}) is None
    assert at_least_half.met(float("nan"), {"LangGraph": 100.0}) is None
    at_most = Target("<=", 40.0)
    assert (at_most.met(40.0, {}), at_most.met(40.1, {}), at_most.met(None, {})) == (True, False, None)
    assert (at_least_half.label(), Target("<=", 2.0, "DBOS").label(), at_most.label()) == (
        "≥ 0.5× LangGraph", "≤ 2.0× DBOS", "≤ 40")


def test_stored_messages_count_every_stream_and_name_session_events_only_while_stored():
    # session events on core NATS: their stream stores nothing (or is gone) and they are not named
    assert stored_messages({"ERPILOT_COMMANDS": 3.0, "ERPILOT_EVENTS": 2.0, "ERPILOT_SESSIONS": 0.0}) == (
        5.0, "5.00 (commands 3.00, events 2.00)")
    assert stored_messages({"ERPILOT_COMMANDS": 3.0, "ERPILOT_EVENTS": 2.0}) == (
        5.0, "5.00 (commands 3.00, events 2.00)")
    # a stream the table does not know still counts, by its name
    assert stored_messages({"ERPILOT_COMMANDS": 3.0, "KV_grants": 1.0, "ERPILOT_SESSIONS": 2.0}) == (
        6.0, "6.00 (commands 3.00, session events 2.00, KV_grants 1.00)")
    assert stored_messages({}) == (None, "–") and stored_messages(None) == (None, "–")


def dbos_phase(concurrency: int, cycles_per_s: float) -> dict:
    return {"concurrency": concurrency, "cycles": 64, "cycles_per_s": cycles_per_s,
            "start_to_interrupt": {"p50_ms": 19.0}, "resume_to_committed": {"p50_ms": 11.0},
            "client_cpu_ms_per_cycle": 18.0, "postgres_cpu_ms_per_cycle": 7.0,
            "client_plus_postgres_cpu_ms_per_cycle": 25.0,
            "db": {"commits_per_cycle": 9.5, "write_xacts_per_cycle": 6.0}}


def test_the_dbos_script_phases_become_the_measured_levels():
    # the execute=transaction variant's phase (here at 32 too, and first) is another measurement: not a level
    raw = {"sequential": dbos_phase(1, 33.6), "concurrent_execute_transaction": dbos_phase(32, 1.0),
           "concurrent": dbos_phase(16, 50.3), "concurrent_32": dbos_phase(32, 52.9), "verify": {"exactly_once": True},
           "duplicate_probe": {"workflows": 20, "execute_runs": 20}, "versions": {"dbos": "3.4.0", "asyncpg": None}}
    peer = normalize_dbos(raw, "../shared/bench/peer_dbos.py", measured_levels=[1, 32])
    assert [(lvl["concurrency"], lvl["cycles_per_s"]) for lvl in peer["levels"]] == [(1, 33.6), (32, 52.9)]
    assert peer["levels"][0]["cpu_ms"] == {"peer": 18.0, "postgres": 7.0, "total": 25.0}
    assert (peer["levels"][0]["write_xacts"], peer["levels"][0]["commits"]) == (6.0, 9.5)
    assert peer["exactly_once"] is True
    assert peer["duplicate_probe"] == "a double start and approval ran execute 20× for 20 workflows"
    # with no level above 1 the script's obligatory concurrent phase also runs at 1: the sequential one counts
    only_one = normalize_dbos({"sequential": dbos_phase(1, 30.0), "concurrent": dbos_phase(1, 99.0)}, "x", [1])
    assert [lvl["cycles_per_s"] for lvl in only_one["levels"]] == [30.0]


def test_the_shared_peers_are_found_beside_the_clone_or_where_the_environment_says(tmp_path):
    shared = tmp_path / "work" / "shared" / "bench"
    shared.mkdir(parents=True)
    (shared / "peer_dbos.py").write_text("")
    worktree = tmp_path / "work" / "wt" / "bench"  # a git worktree one level deeper than the clone
    assert shared_peers_dir(worktree / "src", environ={}) == shared
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "peer_dbos.py").write_text("")
    assert shared_peers_dir(worktree, environ={"ERPILOT_BENCH_PEERS": str(elsewhere)}) == elsewhere
    with pytest.raises(RuntimeError, match="ERPILOT_BENCH_PEERS"):
        shared_peers_dir(tmp_path / "lonely" / "repo", environ={})


def test_the_peers_packages_stay_out_of_the_services_and_the_dev_environment():
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert any(dep.startswith("dbos") for dep in root["dependency-groups"]["peer"])
    assert any(dep.startswith("langgraph") for dep in root["dependency-groups"]["peer"])
    elsewhere = list(root["project"]["dependencies"]) + [
        dep for name, group in root["dependency-groups"].items() if name != "peer" for dep in group]
    for project in [*REPO.glob("services/*/pyproject.toml"), *REPO.glob("libs/*/pyproject.toml")]:
        elsewhere += tomllib.loads(project.read_text())["project"].get("dependencies", [])
    assert [dep for dep in elsewhere if dep.split("[")[0].startswith(("dbos", "langgraph"))] == []


def test_render_sets_the_comparison_and_each_peer_after_the_levels():
    result = {**a_result(), "machine": {}}
    for lvl in result["levels"]:
        lvl["memory"] = {"total": {"rss_peak_mb": 1.0, "pss_peak_mb": 1.0}}
    idle = {"cpu_ms": {"total": 90.0}, "commits": 1.0, "write_xacts": 0.0,
            "memory": {"total": {"pss_peak_mb": 350.0, "rss_peak_mb": 700.0, "processes": 22}}}
    result["idle_per_second"], result["idle_warm_per_second"] = idle, {**idle, "memory": {"total": {
        "pss_peak_mb": 380.0, "rss_peak_mb": 720.0, "processes": 22}}}
    result["peers"]["LangGraph"].update(
        script="benchmarks/peer_langgraph.py", versions={"langgraph": "1.2.24"}, exactly_once=True,
        duplicate_probe="a double resume ran execute 40× for 20 threads")
    text = render(result)
    assert "idle stack, warm: 0.09 core" in text and "PSS 380.0 MB (RSS 720.0 MB, 22 processes)" in text
    assert "| idle PSS MB of the whole stack, warm (after the levels) | 380.0 | – | – | – | – | ≤ 400 ✓ |" in text
    assert ("LangGraph: benchmarks/peer_langgraph.py (langgraph 1.2.24); exactly once: True; a double resume ran "
            "execute 40× for 20 threads") in text
