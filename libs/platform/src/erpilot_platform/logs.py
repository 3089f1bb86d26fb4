"""JSON-lines logging with the ids that concern a line (session, call, pending, operation)."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

_log_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "erpilot_log_context", default=None
)
CONTEXT_KEYS = ("session_id", "call_id", "pending_id", "operation_id", "run_id")
# What faststream's own log records carry (its access log context), kept when present.
BROKER_KEYS = ("subject", "message_id")
# A bearer token in a URL's query (the console's `/?token=` sign-in link) never reaches a log line.
_QUERY_SECRET = re.compile(r"(?i)(?:^|(?<=[?&]))((?:token|access_token|id_token)=)[^&\s\"']+")


def redact_secrets(text: str) -> str:
    """``text`` with the value of every ``token=`` query parameter replaced by ``[redacted]``."""
    return _QUERY_SECRET.sub(r"\1[redacted]", text)


def bind(**ids: Any) -> contextvars.Token:
    """Attach ids to every log line written in the current task until ``unbind``."""
    current = dict(_log_context.get() or {})
    current.update({k: v for k, v in ids.items() if v is not None})
    return _log_context.set(current)


def unbind(token: contextvars.Token) -> None:
    """Restore the ids bound before the matching ``bind``."""
    _log_context.reset(token)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": redact_secrets(record.getMessage()),
        }
        line.update(_log_context.get() or {})
        for key in CONTEXT_KEYS:
            if hasattr(record, key):
                line[key] = getattr(record, key)
        for key in BROKER_KEYS:
            if getattr(record, key, None):
                line[key] = getattr(record, key)
        try:
            from opentelemetry import trace

            span_context = trace.get_current_span().get_span_context()
            if span_context.is_valid:
                line["trace_id"] = format(span_context.trace_id, "032x")
        except ImportError:  # tracing is optional at runtime
            pass
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send JSON lines to stderr for this process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("sqlalchemy.engine", "asyncio", "nats"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # faststream gives its loggers their own coloured text handlers; send them through ours instead.
    for name in ("faststream", "faststream.access", "faststream.access.nats"):
        own = logging.getLogger(name)
        own.handlers[:] = []
        own.propagate = True
