"""The webhook dispatcher, one per approval replica: delivers due rows of ``webhook_deliveries``.

Rows are leased (``next_attempt_at`` pushed past the attempt) in a short transaction, then posted
outside any transaction with Standard Webhooks signatures (a fresh timestamp per attempt, the same id
and body every time). A 2xx answer ends the delivery; anything else, a timeout or a refused
connection is retried with exponential backoff until ``give_up_after`` has passed since the event,
when the row becomes a dead letter (status ``dead``, copied to ERPILOT_DEAD_LETTERS). A receiver that
is down loses nothing: the row waits in PostgreSQL. A crash mid-attempt only delays the row until its
lease ends, so a receiver may see an id twice and must de-duplicate by ``webhook-id``.

A webhook URL is a secret (a Slack-style hook's path is its only credential): logs and the dead letter's
headers show it ``redacted``, and an HTTP client's error text is ``scrubbed`` of it. Only the row keeps it.

The same rows carry the approval channels (issue 34): ``mailto:`` rows are approval emails, sent by the
``Mailer`` while the approval waits and dead after its ``max_attempts``; ``chat.*`` rows are the chat card and
its update, posted as the chat platform's JSON without a Standard Webhooks signature.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol

import httpx

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.webhooks import Webhook, backoff, redacted, scrubbed, sign
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, DeadLetters, Work
from erpilot_platform.loops import Soon, every

log = logging.getLogger(__name__)
LEASE = timedelta(seconds=60)
# Notices that are true only while the approval waits ("expires soon", "managers may now decide"): skipped when it
# ended before they went out.
UNTIL_DECIDED = ("approval.expiring", "approval.escalated")


class Mailer(Protocol):
    max_attempts: int

    async def send(self, approval: PendingApproval, row: Any) -> str | None:
        """None once the mail server accepted the mail, else what went wrong."""
        ...


class WebhookDispatcher:
    def __init__(self, uow: ApprovalUnitOfWork, webhooks: tuple[Webhook, ...], *,
                 dead_letters: DeadLetters | None = None, retry_base_seconds: float = 1.0,
                 give_up_after: timedelta = timedelta(hours=24),
                 timeout_seconds: float = 10.0, poll_seconds: float = 1.0, batch: int = 50,
                 mailer: Mailer | None = None):
        self.unit = uow
        self.mailer = mailer  # approval emails (``mailto:`` rows, webhook_events.MAIL_EVENT); None: no SMTP
        self.by_url = {hook.url: hook for hook in webhooks}
        self.dead_letters = dead_letters
        self.retry_base_seconds = retry_base_seconds
        self.give_up_after = give_up_after
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds
        self.batch = batch
        self._wake = asyncio.Event()
        # httpx logs every request with its full URL at INFO ("HTTP Request: POST <url> ..."): not a webhook's.
        logging.getLogger("httpx").setLevel(logging.WARNING)

    def wake(self) -> None:
        self._wake.set()

    async def dispatch_once(self, client: httpx.AsyncClient) -> int:
        """Attempt every due delivery once; returns how many were attempted."""
        async def claim(unit: Work) -> list[Any]:
            return await unit.webhooks.claim_due(await unit.now(), self.batch, LEASE)

        rows = await self.unit.run(claim)
        await asyncio.gather(*(self._attempt(client, row) for row in rows))
        return len(rows)

    async def _attempt(self, client: httpx.AsyncClient, row: Any) -> None:
        mail = row.url.startswith("mailto:")
        chat = row.event_type.startswith("chat.")  # a card or its update: Slack's own format, no signature
        hook = self.mailer if mail else self.by_url.get(row.url)

        async def before(unit: Work) -> tuple[datetime, PendingApproval | bool | None]:
            """The time of the attempt, and whether to post at all (else the row is finished here)."""
            now = await unit.now()
            if mail and hook is not None:
                approval = await unit.approvals.get(row.pending_id)
                if approval is None or approval.status != "pending" or now >= approval.expires_at:
                    await unit.webhooks.finish(row.delivery_id, status="skipped", attempts=row.attempts, at=now,
                                              error="the approval ended before the email went out")
                    return now, None
                return now, approval
            if hook is None and not chat:
                await unit.webhooks.finish(row.delivery_id, status="dead", attempts=row.attempts, at=now,
                                          error="the endpoint is no longer configured")
                return now, None
            if row.event_type in UNTIL_DECIDED and await unit.approvals.status(row.pending_id) != "pending":
                await unit.webhooks.finish(row.delivery_id, status="skipped", attempts=row.attempts, at=now,
                                          error="the approval ended before the notice went out")
                return now, None
            return now, True

        now, post = await self.unit.run(before)
        if post is None:
            return
        if mail:
            error = await self.mailer.send(post, row)
        elif chat:
            error = await self._post_chat(client, row)
        else:
            error = await self._post(client, hook, row, int(now.timestamp()))
        attempts = row.attempts + 1
        tries_left = not mail or attempts < self.mailer.max_attempts

        async def after(unit: Work) -> bool:
            """Record the attempt; True when the delivery gave up (a dead letter)."""
            now = await unit.now()
            if error is None:
                await unit.webhooks.finish(row.delivery_id, status="delivered", attempts=attempts, at=now)
            elif now - row.created_at >= self.give_up_after or not tries_left:
                await unit.webhooks.finish(row.delivery_id, status="dead", attempts=attempts, at=now, error=error)
                return True
            else:
                await unit.webhooks.retry_later(row.delivery_id, attempts=attempts, error=error,
                                               at=now + backoff(attempts, self.retry_base_seconds))
            return False

        if await self.unit.run(after):
            log.error("webhook %s to %s gave up after %d attempts: %s", row.event_id, redacted(row.url), attempts,
                      scrubbed(error, row.url))
            await self._dead_letter(row, error)

    async def _post(self, client: httpx.AsyncClient, hook: Webhook, row: Any, timestamp: int) -> str | None:
        """None on a 2xx answer, else what went wrong."""
        body = row.body.encode()
        try:
            response = await client.post(hook.url, content=body, headers=sign(hook, row.event_id, timestamp, body),
                                         timeout=self.timeout_seconds)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    async def _post_chat(self, client: httpx.AsyncClient, row: Any) -> str | None:
        try:
            response = await client.post(row.url, content=row.body.encode(), timeout=self.timeout_seconds,
                                         headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"

    async def _dead_letter(self, row: Any, error: str) -> None:
        if self.dead_letters is None:
            return
        # Named after the delivery, then a random part (as ``outbox.published_msg_id``): the dead-letter stream takes
        # every service's dead letters, and an id another publisher could foresee (``wh-<serial>``) would let it
        # store a message under that id first and have this copy dropped as a duplicate.
        headers = {"Erpilot-Reason": scrubbed(error, row.url)[:500], "Erpilot-Webhook-Url": redacted(row.url),
                   "Nats-Msg-Id": f"wh-{row.delivery_id}.{uuid.uuid4().hex}"}
        try:
            await self.dead_letters.publish(row.body.encode(), source=f"webhook.{row.event_type}", headers=headers)
        except Exception:  # the row (status dead) is the record; the stream copy is for `erpilot dlq`
            log.exception("could not copy dead webhook %s to the dead-letter stream", row.event_id)

    async def next_wait(self) -> float:
        seconds = await self.unit.read(lambda unit: unit.webhooks.seconds_to_next())
        return self.poll_seconds if seconds is None else min(max(seconds, 0.0), self.poll_seconds)

    async def run(self) -> None:
        """Forever; failures are logged and retried, never fatal."""
        async with httpx.AsyncClient(follow_redirects=False) as client:
            async def dispatch() -> Soon:
                if await self.dispatch_once(client) >= self.batch:
                    return Soon(0)  # a full batch: more are waiting
                return Soon(await self.next_wait())

            await every(self.poll_seconds, dispatch, wake=self._wake, name="webhook dispatch", retry_after=1.0)
