"""Log lines are JSON with the ids they concern and the current trace id; faststream's lines too."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider

from erpilot_contracts.approval.v1 import Actor, DecideV1, GrantV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import CommitOperationV1
from erpilot_platform.endpoints import ServiceBus, message_ids
from erpilot_platform.logs import JsonFormatter, bind, configure_logging, unbind

pytestmark = pytest.mark.unit


class Lines(logging.Handler):
    """Collects formatted JSON lines."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter("test"))
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines():
    handler = Lines()
    logger = logging.getLogger("erpilot.test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)


def test_a_line_carries_the_bound_ids_and_the_trace_id(lines):
    tracer = TracerProvider().get_tracer("test")  # a local provider: nothing global changes
    token = bind(call_id="call_1", pending_id="pa_1")
    with tracer.start_as_current_span("step") as span:
        logging.getLogger("erpilot.test").info("deciding")
    unbind(token)
    logging.getLogger("erpilot.test").info("later")

    assert lines[0]["call_id"] == "call_1" and lines[0]["pending_id"] == "pa_1"
    assert lines[0]["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert "call_id" not in lines[1] and "trace_id" not in lines[1]


def test_message_ids_are_found_on_the_message_and_in_a_nested_grant():
    grant = GrantV1(pending_id="pa_9", operation_id="op_9", fingerprint="sha256:x", decided_by="ann",
                    decided_at=datetime.now(UTC))
    assert message_ids(CommitOperationV1(operation_id="op_9", grant=grant)) == {
        "operation_id": "op_9", "pending_id": "pa_9"}


async def test_a_handlers_lines_carry_the_ids_of_its_message(lines):
    decide = DecideV1(pending_id="pa_7", action="approve", fingerprint="sha256:x",
                      actor=Actor(sub="ann", roles=["approver"]))

    async def in_progress() -> None:
        pass

    message = SimpleNamespace(body=decide.model_dump_json().encode(), in_progress=in_progress,
                              raw_message=SimpleNamespace(subject="s", metadata=SimpleNamespace(num_delivered=1)))

    async def handler(cmd: DecideV1) -> ReplyV1:
        logging.getLogger("erpilot.test").info("deciding")
        return ReplyV1.success({})

    await ServiceBus(broker=None, service="approval")._run_durable(DecideV1, handler, message)
    logging.getLogger("erpilot.test").info("after")

    assert lines[0]["pending_id"] == "pa_7"
    assert "pending_id" not in lines[1]


def test_faststream_lines_go_through_the_json_formatter(capsys):
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    own = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate)
           for name in ("faststream", "faststream.access", "faststream.access.nats")}
    try:
        configure_logging("erp")
        logging.getLogger("faststream.access.nats").error("handler failed", extra={"subject": "erpilot.v1.x"})
        line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, (handlers, propagate) in own.items():
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).propagate = propagate
    assert line["service"] == "erp" and line["msg"] == "handler failed" and line["subject"] == "erpilot.v1.x"
