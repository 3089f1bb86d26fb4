"""Composition root of the gateway: FastAPI app, broker client, routes."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from erpilot_gateway import console, problems
from erpilot_gateway.input_guard import InputGuard
from erpilot_gateway.mcp_server.http import McpHttp
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.routes import approvals, audit, channels, delegations, erp, health, sessions, standing, tools
from erpilot_gateway.services import Services
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.broker import create_broker
from erpilot_platform.logs import configure_logging, redact_secrets
from erpilot_platform.runtime import connect_with_retry, run_service
from erpilot_platform.telemetry import shutdown_telemetry
from erpilot_platform.waiting import woken_within

SERVICE = "gateway"
# Where OpenTelemetry's HTTP semantic conventions (old and new) put the query string.
URL_ATTRIBUTES = ("http.target", "http.url", "url.query", "url.full")


def create_app(settings: GatewaySettings, *, broker=None) -> FastAPI:
    """Build the app; nothing connects until start-up."""
    rules = settings.token_rules()
    broker = broker or create_broker(settings.nats_url, SERVICE, user=settings.nats_user,
                                     password=settings.nats_password)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await connect_with_retry(broker)
        async with mcp.run():  # the MCP transport's sessions live as long as the app
            yield
        await broker.stop()
        shutdown_telemetry()  # uvicorn ends the process with the signal it caught: exit hooks do not run

    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN on the origin of the console's cookie,
    # outside its CSP, and no dependency ships the assets to serve here. The document is at /openapi.json.
    app = FastAPI(title="Erpilot", version="1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="An AI agent works the ERP; people approve every write that matters.")
    app.state.settings = settings
    # The token rules (secret, issuer, audience, longest lifetime) every decode_token call checks; the
    # name stays for the routes that pass it on.
    app.state.auth_secret = rules
    app.state.broker = broker
    # Every command to the agent carries the caller's requester assertion, signed with the gateway's key alone.
    assertions = RequesterAssertions(settings.assertion_key(), previous=settings.previous_assertion_key())
    app.state.services = Services(broker, settings.request_timeout_seconds, assertions)
    mcp = McpHttp(app.state.services, rules)
    problems.install(app)
    app.add_middleware(InputGuard)  # size, hostile JSON and NUL checks before routing and authentication
    for module in (health, tools, sessions, approvals, channels, delegations, standing, audit, erp):
        app.include_router(module.router)
    app.include_router(console.router)  # web console and approval page (GET /, /resume/{id})
    mcp.install(app)  # MCP (Streamable HTTP) at /mcp
    # An HTTP request starts the trace; the NATS middleware carries it to every service it reaches.
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz",
                                       server_request_hook=_mark_gateway_span)
    return app


def _mark_gateway_span(span, scope) -> None:
    """Name the service, and keep a sign-in link's ``?token=`` out of the span's URL attributes."""
    if not span.is_recording():
        return
    span.set_attribute("erpilot.service", SERVICE)
    for key, value in (getattr(span, "attributes", None) or {}).items():
        if key in URL_ATTRIBUTES and isinstance(value, str) and redact_secrets(value) != value:
            span.set_attribute(key, redact_secrets(value))


class Server(uvicorn.Server):
    """uvicorn's server without its 0.1 s tick (issue 13: ten wake-ups a second in an idle gateway).

    uvicorn's main loop sleeps 0.1 s at a time to see whether a signal asked it to stop and renews the Date
    header every tenth tick. This one ticks once a second (the header's resolution) and is woken at once
    by the signal, so a stop is no slower.
    """

    async def main_loop(self) -> None:
        stop_asked = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake_on_exit = lambda: loop.call_soon_threadsafe(stop_asked.set)
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000  # on_tick renews the Date header when counter % 10 == 0
            await woken_within(stop_asked, 1.0)

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        if (wake := getattr(self, "_wake_on_exit", None)) is not None:
            wake()


def main() -> None:
    settings = GatewaySettings()
    configure_logging(SERVICE, settings.log_level)
    app = create_app(settings)
    config = uvicorn.Config(app, host=settings.http_host, port=settings.http_port, log_config=None,
                            proxy_headers=True, timeout_graceful_shutdown=5)
    run_service(Server(config).serve())
