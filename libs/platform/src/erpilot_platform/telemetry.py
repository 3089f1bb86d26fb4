"""OpenTelemetry set-up from the standard ``OTEL_*`` variables.

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set: spans and metrics go to
  that collector over OTLP/HTTP. Unset: a provider still exists (so trace ids reach the logs and
  propagate across services in message headers) but nothing is exported.
- ``OTEL_SDK_DISABLED=true``: nothing at all.
- ``OTEL_SERVICE_NAME`` overrides the default ``erpilot-<service>``.

An unreachable collector never stops a service: exports happen in the background and failures are
only logged by the SDK.
"""

from __future__ import annotations

import os

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def _endpoint(signal: str) -> str | None:
    return os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def configure_telemetry(service: str) -> None:
    """Install the global tracer and meter providers for this process (once)."""
    global _configured
    if _configured or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    _configured = True
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"erpilot-{service}"),
                                "service.namespace": "erpilot"})
    tracer_provider = TracerProvider(resource=resource)
    if _endpoint("TRACES"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    readers = []
    if _endpoint("METRICS"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


tracer = trace.get_tracer("erpilot")
meter = metrics.get_meter("erpilot")

# Instruments shared by the services (SPEC: pending approvals, decision latency, commit outcomes,
# redeliveries). Meters from the global proxy bind to the provider installed later.
consumer_redeliveries = meter.create_counter(
    "erpilot.consumer.redeliveries", unit="{message}", description="Messages delivered more than once.")
commit_outcomes = meter.create_counter(
    "erpilot.erp.commit.outcomes", unit="{commit}", description="ERP commits by status and code.")
decision_latency = meter.create_histogram(
    "erpilot.approval.decision.latency", unit="s", description="From approval requested to decided.")
