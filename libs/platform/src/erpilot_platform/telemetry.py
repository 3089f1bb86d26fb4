"""OpenTelemetry set-up from the standard ``OTEL_*`` variables.

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set: spans and metrics go to
  that collector over OTLP/HTTP. Unset: a provider still exists (so trace ids reach the logs and
  propagate across services in message headers) but nothing is exported, and so no span is recorded
  (sampler ``always_off``: a span nobody exports costs CPU on every hop for nothing; issue 13).
- ``OTEL_TRACES_SAMPLER`` (and ``OTEL_TRACES_SAMPLER_ARG``) choose the sampler, as the SDK defines them;
  unset, every trace is sampled when there is a collector (``parentbased_always_on``).
- ``OTEL_SDK_DISABLED=true``: nothing at all.
- ``OTEL_SERVICE_NAME`` overrides the default ``erpilot-<service>``.

An unreachable collector never stops a service: exports happen in the background, failures are only
logged by the SDK, and a stopping process waits at most ``SHUTDOWN_SECONDS`` for its last export.

Custom spans mark the meaningful steps only (``step``: prepare, request, decide, expire, commit), named
``"<service> <action>"`` with ``erpilot.service`` and the ids they concern (``erpilot.session_id``,
``erpilot.call_id``, ``erpilot.pending_id``, ``erpilot.operation_id``) as attributes. How one tool call
stays one trace is described in docs/ARCHITECTURE.md, "Tracing".
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Link, Span

from erpilot_platform.logs import bind, unbind

_configured = False
_providers: list[Any] = []  # what configure_telemetry installed, for shutdown_telemetry
SHUTDOWN_SECONDS = 3.0


def _endpoint(signal: str) -> str | None:
    return os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def metrics_exported() -> bool:
    """Whether this process sends its metrics anywhere (else a loop that only feeds a gauge is idle cost)."""
    return bool(_endpoint("METRICS")) and os.environ.get("OTEL_SDK_DISABLED", "").lower() != "true"


def configure_telemetry(service: str) -> None:
    """Install the global tracer and meter providers for this process (once)."""
    global _configured
    if _configured or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    _configured = True
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"erpilot-{service}"),
                                "service.namespace": "erpilot"})
    exporting = _endpoint("TRACES") is not None
    # sampler=None: the SDK's own reading of OTEL_TRACES_SAMPLER, else parentbased_always_on
    sampler = None if exporting or os.environ.get("OTEL_TRACES_SAMPLER") else ALWAYS_OFF
    tracer_provider = TracerProvider(resource=resource, sampler=sampler,
                                     shutdown_on_exit=False)  # shutdown_telemetry instead
    if exporting:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    readers = []
    if _endpoint("METRICS"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    metrics.set_meter_provider(meter_provider)
    _providers[:] = [tracer_provider, meter_provider]
    atexit.register(shutdown_telemetry)


def shutdown_telemetry(timeout_seconds: float = SHUTDOWN_SECONDS) -> None:
    """Export what is still buffered and stop, waiting at most ``timeout_seconds`` (idempotent).

    The SDK's own exit hook would retry an unreachable collector for up to 10 s per signal, longer
    than a deployment's stop grace period; what the collector did not take by then is dropped.
    """
    providers, _providers[:] = list(_providers), []
    if providers:
        worker = threading.Thread(target=lambda: [provider.shutdown() for provider in providers],
                                  name="telemetry-shutdown", daemon=True)
        worker.start()
        worker.join(timeout_seconds)


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


class CachedGauge:
    """An observable gauge reporting the last value a service ``set`` (callbacks run on the metric
    reader's thread: they must never touch the database or the event loop, so the service refreshes
    the value itself, e.g. every few seconds)."""

    def __init__(self, name: str, *, unit: str, description: str):
        self.value: float | None = None
        meter.create_observable_gauge(name, callbacks=[self._observe], unit=unit, description=description)

    def set(self, value: float) -> None:
        self.value = value

    def _observe(self, _: CallbackOptions) -> list[Observation]:
        return [] if self.value is None else [Observation(self.value)]


pending_approvals = CachedGauge(
    "erpilot.approval.pending", unit="{approval}", description="Approvals waiting for a decision.")


def id_attributes(**ids: Any) -> dict[str, str]:
    """Span attributes ``erpilot.<id>`` for the ids that are set."""
    return {f"erpilot.{key}": str(value) for key, value in ids.items() if value is not None}


def trace_carrier() -> dict[str, str]:
    """The current trace context as W3C headers, to store with a record whose later steps continue it."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextmanager
def step(service: str, action: str, *, resume: Mapping[str, str] | None = None, **ids: Any) -> Iterator[Span]:
    """A span ``"<service> <action>"`` around one meaningful step; its ids also go on every log line.

    ``resume``: a trace context stored earlier (``trace_carrier()``). The span then continues that
    trace (the tool call's) and links to the current one (the request that triggered this step).
    """
    context, links = None, []
    if resume:
        current = trace.get_current_span().get_span_context()
        links = [Link(current)] if current.is_valid else []
        context = propagate.extract(resume)
    token = bind(**ids)
    try:
        with tracer.start_as_current_span(f"{service} {action}", context=context, links=links,
                                          attributes={"erpilot.service": service, **id_attributes(**ids)}) as span:
            yield span
    finally:
        unbind(token)
