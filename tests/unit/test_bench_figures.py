"""The arithmetic and tables of `erpilot bench` (no stack, no timing): every expected value worked by hand."""

from __future__ import annotations

import math

import pytest

from erpilot.bench.db import admin_url
from erpilot.bench.proc import parse_stat
from erpilot.bench.report import fmt, level_table, render
from erpilot.bench.stats import (
    busy_fraction,
    cpu_ms_per_unit,
    net_of_idle,
    per_unit,
    percentile,
    ratio,
    summary_ms,
    tree_ticks,
)

pytestmark = pytest.mark.unit


def test_percentile_is_nearest_rank_over_unsorted_values():
    values = [7, 3, 10, 1, 5, 9, 2, 8, 4, 6]
    assert percentile(values, 50) == 5
    assert percentile(values, 90) == 9
    assert percentile(values, 99) == 10
    assert percentile(values, 0) == 1
    assert percentile([42.0], 99) == 42.0
    assert math.isnan(percentile([], 50))


def test_summary_is_in_milliseconds():
    assert summary_ms([0.004, 0.001, 0.003, 0.002]) == {
        "n": 4, "p50_ms": 2.0, "p90_ms": 4.0, "p99_ms": 4.0, "max_ms": 4.0, "mean_ms": 2.5}
    assert summary_ms([]) == {}


def test_stat_line_whose_name_holds_spaces_and_parentheses():
    line = "42 (postgres: (bench) idle) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 33 44 20 0 1 0 5 6 7\n"
    assert parse_stat(line) == (7, 33, 77)


def test_tree_ticks_counts_descendants_and_reaped_children_but_not_strangers():
    stats = {
        10: (1, 5, 3),    # the root: own 5, reaped children 3
        11: (10, 7, 0),   # a child
        12: (11, 2, 1),   # a grandchild, which reaped one of its own
        20: (1, 100, 0),  # another process of the machine
    }
    assert tree_ticks(stats, 10) == 5 + 3 + 7 + 2 + 1
    assert tree_ticks(stats, 11) == 7 + 2 + 1
    assert tree_ticks(stats, 99) == 0


def test_cpu_per_unit_from_tick_totals():
    # 200 ticks at 100 per second = 2 s = 2000 ms over 10 cycles; a role new in `after` starts at 0
    assert cpu_ms_per_unit({"agent": 100}, {"agent": 300, "erp": 50}, 10, 100) == {"agent": 200.0, "erp": 50.0}
    assert math.isnan(cpu_ms_per_unit({"nats": 500}, {"nats": 400}, 10, 100)["nats"])  # restarted: no figure
    assert cpu_ms_per_unit({}, {"agent": 1}, 0, 100) == {}


def test_per_unit_takes_the_idle_share_off_and_never_goes_negative():
    assert per_unit(100, 250, 10, idle=30) == 12.0
    assert per_unit(100, 110, 10, idle=30) == 0.0
    assert math.isnan(per_unit(0, 1, 0))


def test_ratio_and_busy_share():
    assert ratio(50, 100) == 0.5
    assert ratio(None, 1) is None and ratio(1, 0) is None and ratio(math.nan, 1) is None
    assert busy_fraction((100, 1000), (400, 2000)) == 0.3
    assert math.isnan(busy_fraction((1, 1), (1, 1)))


def test_net_of_idle_takes_the_idle_rate_over_the_phase_off():
    figures = {"units": 10, "seconds": 2.0, "cpu_ms": {"total": 100.0}, "commits": 20.0}
    idle = {"cpu_ms": {"total": 50.0}, "commits": 5.0}  # per second
    assert net_of_idle(figures, idle) == {"cpu_ms": 90.0, "commits": 19.0}


def test_admin_url_keeps_the_server_and_names_the_measured_database():
    url = "postgresql://postgres@/erpilot?host=/tmp/pg"
    assert admin_url(url) == ("postgresql://postgres@/postgres?host=/tmp/pg", "erpilot")
    assert admin_url("postgresql+asyncpg://u:p@127.0.0.1:5432/shop", "peer") == (
        "postgresql://u:p@127.0.0.1:5432/peer", "shop")


def test_fmt():
    assert (fmt(12.345), fmt(1.234), fmt(None), fmt(math.nan), fmt(3)) == ("12.3", "1.23", "–", "–", "3")


def level(concurrency: int, cycles_per_s: float, cpu_total: float) -> dict:
    return {"concurrency": concurrency, "cycles": 64, "failures": 0, "cycles_per_s": cycles_per_s,
            "stages": {"request_to_pending": {"p50_ms": 30.0, "p90_ms": 40.0, "p99_ms": 50.0},
                       "decision_to_finished": {"p50_ms": 20.0, "p90_ms": 25.0, "p99_ms": 60.0}},
            "cpu_ms": {"total": cpu_total, "agent": 40.0}, "commits": 18.0, "write_xacts": 9.0, "rollbacks": 80.0,
            "memory": {"total": {"rss_peak_mb": 1100.0, "pss_peak_mb": 500.0}}}


def test_level_table_has_a_column_per_level_and_dashes_for_missing_figures():
    lines = level_table({"levels": [level(1, 9.0, 120.0), level(32, 16.0, 110.0)]})
    assert lines[0] == "| figure | 1 in flight | 32 in flight |"
    assert "| cycles/s (draft included) | 9.00 | 16.0 |" in lines
    assert "| request → approval_pending ms p50/p90/p99 | 30.0 / 40.0 / 50.0 | 30.0 / 40.0 / 50.0 |" in lines
    assert "|   … agent | 40.0 | 40.0 |" in lines
    assert "|   … nats | – | – |" in lines
    assert "| database rollbacks per cycle | 80.0 | 80.0 |" in lines
    assert "| read tool call get_product ms p50/p90/p99 | – | – |" in lines
    assert "| JetStream messages stored per read | – | – |" in lines


def test_jetstream_messages_are_summed_and_listed_by_stream_without_the_empty_ones():
    figures = {**level(1, 9.0, 120.0),
               "jetstream_messages": {"ERPILOT_SESSIONS": 7.0, "ERPILOT_COMMANDS": 7.0, "ERPILOT_DLQ": 0.0,
                                      "ERPILOT_EVENTS": 3.0}}
    lines = level_table({"levels": [figures]})
    assert ("| JetStream messages stored per cycle, by stream | 17.0: ERPILOT_COMMANDS 7.00, ERPILOT_EVENTS 3.00, "
            "ERPILOT_SESSIONS 7.00 |") in lines


def test_render_names_failures_and_the_machine():
    result = {"levels": [{**level(1, 9.0, 120.0), "first_failure": "request 500: boom"}],
              "idle_per_second": {"cpu_ms": {"total": 90.0, "agent": 26.0}, "commits": 34.8, "write_xacts": 0.0,
                                  "memory": {"total": {"pss_peak_mb": 400.0, "rss_peak_mb": 700.0, "processes": 22}}},
              "machine": {"cpus": 2, "cpu_model": "Xeon", "kernel": "6.1", "python": "3.11.7"}}
    text = render(result)
    assert "1 in flight, first failure: request 500: boom" in text
    assert "idle stack: 0.09 core (gateway –, agent 26.0," in text
    assert "34.8 commits/s" in text and "PSS 400.0 MB (RSS 700.0 MB, 22 processes)" in text
    assert text.endswith("machine: 2 × Xeon, Linux 6.1, Python 3.11.7")
