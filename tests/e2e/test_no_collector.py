"""Tracing on, collector away: every service starts, serves and stops as usual (SPEC §7, ``OTEL_*``).

The stack exports spans and metrics over OTLP to a port nobody listens on; a read and an approved
write still work, no service dies, and each stops in time, having only logged its failed exports.
"""

from __future__ import annotations

import json
import signal

import pytest

from erpilot.stack.stack import free_port
from tests.e2e.conftest import Api, isolated_stack, wait_for

pytestmark = pytest.mark.e2e
SERVICES = ("gateway", "agent", "approval", "erp")


def _export_failures(logs_parent, service: str) -> list[dict]:
    """The log lines in which the service's OpenTelemetry exporter reported a failed export."""
    path = logs_parent / "logs" / f"{service}.log"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger", "").startswith("opentelemetry.exporter")]


def test_every_service_runs_with_tracing_on_and_no_collector(database_url, tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": closed, "OTEL_METRIC_EXPORT_INTERVAL": "500",
           "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with isolated_stack(database_url, tmp_path, env) as stack:
        requester = Api(stack.base_url, "otel-req", "requester")
        approver = Api(stack.base_url, "otel-appr", "approver")
        session_id = requester.new_session()

        read = requester.call(session_id, "search_products", {"query": "paper"})
        assert read.status_code == 200 and read.json()["outcome"] == "succeeded", read.text
        drafted = requester.call(session_id, "create_order_draft",
                                 {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]})
        revision = drafted.json()["result"]
        pending = requester.call(session_id, "submit_order",
                                 {"draft_id": revision["draft_id"], "revision": revision["revision"]}).json()
        decided = approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                {"action": "approve", "fingerprint": pending["fingerprint"]})
        assert decided.status_code == 200, decided.text

        def finished():
            view = requester.get(f"/v1/sessions/{session_id}/tool-calls/{pending['call_id']}").json()
            return view if view["status"] == "finished" else None

        assert wait_for(finished)["outcome"] == "succeeded"
        wait_for(lambda: all(_export_failures(tmp_path, service) for service in SERVICES), timeout=60)
        assert stack.supervisor.check() == [], "a service died"
        stack.stop()

    # Each service gave up on its last export within its shutdown grace: the supervisor killed none.
    codes = {name: child.process.returncode for name, child in stack.supervisor.children.items()}
    assert -signal.SIGKILL not in codes.values(), codes

    # Tracing was on: each service tried to export its spans, and only logged that it could not.
    for service in SERVICES:
        assert _export_failures(tmp_path, service), service
