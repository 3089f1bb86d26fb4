"""Outgoing webhooks (no I/O): configuration, the events and their Slack-compatible text, Standard
Webhooks signatures and the retry schedule.

Every fact a webhook states comes from the approval service's own records and the ledger's events
(never from the agent): the approval's tool, normalised arguments, preview and required roles, its
decision, and the ERP's operation status.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

EVENTS = ("approval.requested", "approval.expiring", "approval.escalated", "approval.resolved", "operation.finished")
MAX_BACKOFF = timedelta(minutes=10)


class WebhookConfigError(ValueError):
    """A webhook entry is malformed; the message starts with the offending key."""


@dataclass(frozen=True)
class Webhook:
    url: str
    events: tuple[str, ...]
    secret: str

    def signing_key(self) -> bytes:
        """Standard Webhooks: ``whsec_<base64>`` is the base64 key; any other secret is used as its bytes."""
        if self.secret.startswith("whsec_"):
            return base64.b64decode(self.secret.removeprefix("whsec_"))
        return self.secret.encode()


def parse_webhooks(value: Any, path: str) -> tuple[Webhook, ...]:
    """A list of ``{url, events?, secret}`` tables (``events`` defaults to every event)."""
    if not isinstance(value, list):
        raise WebhookConfigError(f"{path}: expected a list of tables ([[webhooks]]), got {value!r}")
    hooks = []
    for index, item in enumerate(value):
        at = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise WebhookConfigError(f"{at}: expected a table, got {item!r}")
        for key in item:
            if key not in ("url", "events", "secret"):
                raise WebhookConfigError(f"{at}.{key}: unknown key (expected one of url, events, secret)")
        url = item.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            # Not echoed: a webhook URL is a secret even when it is malformed (``redacted``).
            raise WebhookConfigError(f"{at}.url: expected an http(s) URL")
        events = item.get("events", list(EVENTS))
        if not isinstance(events, list) or not events or any(e not in EVENTS for e in events):
            raise WebhookConfigError(f"{at}.events: expected a non-empty list of {', '.join(EVENTS)}, got {events!r}")
        secret = item.get("secret")
        if not isinstance(secret, str) or len(secret) < 16:
            raise WebhookConfigError(f"{at}.secret: expected a string of at least 16 characters")
        if secret.startswith("whsec_"):
            try:
                base64.b64decode(secret.removeprefix("whsec_"), validate=True)
            except ValueError:
                raise WebhookConfigError(f"{at}.secret: whsec_ secrets are base64") from None
        hooks.append(Webhook(url=url, events=tuple(e for e in EVENTS if e in events), secret=secret))
    return tuple(hooks)


def redacted(url: str) -> str:
    """A webhook URL as logs and dead-letter headers show it: scheme and host, then a short digest that tells
    endpoints apart. A Slack-style hook's path is its only credential (whoever knows it may post to the
    channel), so neither it nor the query nor any user info is ever shown."""
    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    digest = hashlib.sha256(url.encode()).hexdigest()[:8]
    return f"{parts.scheme}://{parts.hostname or '?'}{port}/…#{digest}"


def scrubbed(text: str, url: str) -> str:
    """``text`` (an HTTP client's error, say) with ``url``, its path and its query replaced by ``redacted(url)``."""
    parts = urlsplit(url)
    text = text.replace(url, redacted(url))
    for secret in (parts.path + ("?" + parts.query if parts.query else ""), parts.path, parts.query):
        if len(secret) > 1:  # "/" alone says nothing
            text = text.replace(secret, "/…")
    return text


def event_id(event_type: str, key: str) -> str:
    """The stable id of one event (the same on every retry and every redelivery): ``msg_<hex>``."""
    return "msg_" + hashlib.sha256(f"{event_type}\n{key}".encode()).hexdigest()[:32]


def sign(webhook: Webhook, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers: HMAC-SHA256 over ``id.timestamp.body``, base64, as ``v1,<sig>``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(webhook.signing_key(), signed, hashlib.sha256).digest()).decode()
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp), "webhook-signature": f"v1,{signature}",
            "content-type": "application/json"}


def backoff(attempts: int, base_seconds: float) -> timedelta:
    """Wait before the next attempt after ``attempts`` failed ones: base · 2^(attempts-1), at most 10 min."""
    return min(timedelta(seconds=base_seconds * 2 ** max(attempts - 1, 0)), MAX_BACKOFF)


def body_of(event_type: str, occurred_at: datetime, data: dict[str, Any], text: str) -> bytes:
    """The payload: Standard Webhooks' ``type``/``timestamp``/``data`` plus Slack's ``text``."""
    payload = {"type": event_type, "timestamp": occurred_at.isoformat(), "data": data, "text": text}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str).encode()
