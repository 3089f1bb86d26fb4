"""With no collector no span is recorded, yet trace ids still exist and propagate (issue 13); the operator's
``OTEL_TRACES_SAMPLER`` and a configured collector turn recording on. Each case runs in its own interpreter:
a process installs its tracer provider once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

PROBE = """
import json
from opentelemetry import trace
from erpilot_platform.telemetry import configure_telemetry, trace_carrier
configure_telemetry("probe")
with trace.get_tracer("probe").start_as_current_span("step") as span:
    context = span.get_span_context()
    print(json.dumps({"recording": span.is_recording(), "valid": context.is_valid,
                      "carrier": trace_carrier()}))
"""


def probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def sampled(carrier: dict) -> bool:
    """The W3C ``traceparent``'s sampled flag (bit 0 of its last field)."""
    return bool(int(carrier["traceparent"].rsplit("-", 1)[1], 16) & 1)


def test_without_a_collector_spans_are_not_recorded_but_the_trace_id_still_propagates():
    seen = probe()
    assert seen["recording"] is False and seen["valid"] is True
    assert not sampled(seen["carrier"])  # a real trace id, flagged not sampled


def test_the_operators_sampler_is_used_when_set():
    assert probe(OTEL_TRACES_SAMPLER="always_on")["recording"] is True


def test_with_a_collector_every_trace_is_recorded_by_default():
    # nothing listens there: the export fails in the background, which is not what this checks
    seen = probe(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_BSP_SCHEDULE_DELAY="60000")
    assert seen["recording"] is True and sampled(seen["carrier"])
