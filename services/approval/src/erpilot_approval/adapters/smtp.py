"""Approval emails over SMTP (``ERPILOT_SMTP_URL``): the message is built by ``domain.mail`` with links minted at
each attempt by ``domain.links``, then handed to the server by ``smtplib`` on a worker thread."""

from __future__ import annotations

import asyncio
import json
import smtplib
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.links import Link, mint
from erpilot_approval.domain.mail import approval_email, decision_url


def parse_smtp_url(url: str) -> tuple[str, int]:
    """``smtp://host:port`` (port 25 when left out) as host and port; anything else is a ValueError."""
    parts = urlsplit(url)
    if parts.scheme != "smtp" or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError("expected smtp://host:port")
    return parts.hostname, parts.port or 25


class SmtpMailer:
    def __init__(self, url: str, sender: str, link_key: bytes, public_url: str, *, max_attempts: int = 8,
                 timeout_seconds: float = 10.0):
        self.host, self.port = parse_smtp_url(url)
        self.sender = sender
        self.link_key = link_key
        self.public_url = public_url
        self.max_attempts = max_attempts
        self.timeout_seconds = timeout_seconds

    def message(self, approval: PendingApproval, row: Any) -> EmailMessage:
        """The mail of one delivery row (``mailto:<address>``, body naming the person)."""
        sub = json.loads(row.body)["sub"]

        def url(action: str) -> str:
            link = Link(pending_id=approval.pending_id, sub=sub, action=action, fingerprint=approval.fingerprint,
                        expires_at=approval.expires_at)
            return decision_url(self.public_url, approval.pending_id, mint(self.link_key, link))

        return approval_email(approval, to=row.url.removeprefix("mailto:"), sender=self.sender,
                              approve_url=url("approve"), reject_url=url("reject"))

    async def send(self, approval: PendingApproval, row: Any) -> str | None:
        """None once the server accepted the mail, else what went wrong (the delivery is retried)."""
        message = self.message(approval, row)
        try:
            await asyncio.to_thread(self._send, message)
        except (OSError, smtplib.SMTPException) as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        return None

    def _send(self, message: EmailMessage) -> None:
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout_seconds) as smtp:
            smtp.send_message(message)
