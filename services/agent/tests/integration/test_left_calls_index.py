"""The agent's pass over left tool calls (``drive_left_calls_forever``, every 30 s) reads the partial index of the
external calls not driven yet (migration 0009), in the order it wants them: no scan of every call, no sort."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from erpilot_agent.adapters.sql_calls import left_by_their_request
from erpilot_agent.service_layer.tool_calls import LEFT_CALLS_SECONDS

pytestmark = pytest.mark.integration


def _nodes(plan: dict) -> list[dict]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _nodes(child))]


async def test_the_pass_over_left_calls_reads_its_partial_index_in_order(engine):
    query = left_by_their_request(LEFT_CALLS_SECONDS).compile(dialect=engine.dialect)
    async with engine.connect() as conn, conn.begin():
        # A test database holds few calls, where a scan of the table is cheapest; in a deployment's, with every call
        # ever made, it is not. Ruled out here, the plan shows which index the query can use.
        await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        explained = await conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {query.string}",
                                               (timedelta(seconds=LEFT_CALLS_SECONDS),))
        raw = explained.scalar_one()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]

    nodes = _nodes(plan)
    assert [node.get("Index Name") for node in nodes if "Index Name" in node] == ["tool_calls_left_by_request"], plan
    assert not any(node["Node Type"] in ("Sort", "Incremental Sort", "Seq Scan") for node in nodes), plan
