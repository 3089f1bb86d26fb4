"""A real JetStream redelivery (SPEC §8: exactly one effect per operation under redelivery): the ERP's commit
handler dies mid-message (failpoint `erp.commit.after_db_commit`: the effect is committed in PostgreSQL, the
message is neither answered nor acknowledged), and after its ack wait JetStream delivers that same stored
message again, to the restarted ERP, with a delivery count of 2. Not a re-published copy: the count is the
one the consumer reads (`num_delivered`), reported by the ERP itself through its `erpilot.consumer.redeliveries`
metric (counted for every delivery with `num_delivered > 1`), exported over OTLP to a collector in this test.
The redelivered commit finds the recorded outcome: one order, stock taken once, one grant consumed.

The stack runs alone (own NATS and database), with a 2 s ack wait. About 30-40 s.
"""

from __future__ import annotations

import gzip
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from erpilot.stack.stack import Stack
from erpilot_contracts.subjects import ERP_CMD_COMMIT
from tests.e2e.conftest import Api, died_at_its_failpoint, isolated_stack, restart_armed, wait_for
from tests.e2e.test_duplicate_delivery import sql
from tests.e2e.test_write_flow import decide, draft, finished, request_write, stock

pytestmark = pytest.mark.e2e
REDELIVERIES = "erpilot.consumer.redeliveries"
SKU = "SKU-STAPLER"


class MetricsCollector(ThreadingHTTPServer):
    """An OTLP/HTTP metrics endpoint: keeps the latest value of the redelivery counter per (service, subject)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Export)
        self.redeliveries: dict[tuple[str, str], int] = {}
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/metrics"

    def take(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            service = next((a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), "")
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == REDELIVERIES:
                        for point in metric.sum.data_points:  # cumulative: the latest value is the total
                            subject = next(a.value.string_value for a in point.attributes if a.key == "subject")
                            self.redeliveries[(service, subject)] = point.as_int


class _Export(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.take(body)
        answer = ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def collector() -> Iterator[MetricsCollector]:
    server = MetricsCollector()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def redelivery_stack(database_url, tmp_path_factory, collector) -> Iterator[Stack]:
    with isolated_stack(database_url, tmp_path_factory.mktemp("redelivery"), {
            "ERPILOT_ACK_WAIT_SECONDS": "2", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": collector.endpoint,
            "OTEL_METRIC_EXPORT_INTERVAL": "300"}) as stack:
        yield stack


def test_a_commit_handler_killed_before_its_ack_sees_the_message_again_and_commits_once(redelivery_stack, collector):
    stack = redelivery_stack
    requester = Api(stack.base_url, f"redeliver-req-{secrets.token_hex(3)}", "requester")
    approver = Api(stack.base_url, f"redeliver-appr-{secrets.token_hex(3)}", "approver", "manager")
    restart_armed(stack, "erp", "erp.commit.after_db_commit=crash")
    session_id = requester.new_session()
    before = stock(requester, SKU)
    revision = draft(requester, session_id, [(SKU, 2)])
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert collector.redeliveries.get(("erpilot-erp", ERP_CMD_COMMIT), 0) == 0
    assert decide(approver, pending, "approve").status_code == 200

    died_at_its_failpoint(stack, "erp", timeout=60)  # effect committed, message not acked
    [operation] = sql(stack.database_url, "select operation_id, status from erp.operations where call_id = $1",
                      pending["call_id"])
    assert operation["status"] == "committed"  # the effect is in before anything was acknowledged
    restart_armed(stack, "erp", None)

    view = finished(requester, session_id, pending["call_id"], timeout=90)
    assert view["outcome"] == "succeeded", view
    # The restarted ERP itself saw a delivery with num_delivered >= 2 on the commit subject.
    assert wait_for(lambda: collector.redeliveries.get(("erpilot-erp", ERP_CMD_COMMIT), 0) >= 1, timeout=60), \
        collector.redeliveries
    # Exactly one effect: one order for the revision, the stock taken once, one grant consumed.
    orders = sql(stack.database_url, "select order_id from erp.orders where draft_id = $1 and revision = $2",
                 revision["draft_id"], revision["revision"])
    assert len(orders) == 1 and view["result"]["order_id"] == orders[0]["order_id"]
    assert stock(requester, SKU) == before - 2
    grants = sql(stack.database_url, "select pending_id from erp.consumed_grants where operation_id = $1",
                 operation["operation_id"])
    assert [g["pending_id"] for g in grants] == [pending["pending_id"]]
