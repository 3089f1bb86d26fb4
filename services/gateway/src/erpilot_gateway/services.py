"""The gateway's one way to the other services (its port): typed NATS requests that return the reply's model or
raise Problem, the requester assertion a tool call or a run carries (signed only once the session was found to be
the caller's), a session's events (live, or from the start for the SSE stream) and the readiness pings.

Only this module and its NATS side (``session_watch``) touch the broker; the edges (``routes``, ``console``,
``mcp_server``) and what they share (``tool_calls``, ``catalogue``, ``sse``) ask through ``Services``
(services/gateway/tests/unit/test_layer_imports.py). Every failure reaches them as a ``Problem``: a refusal with
its ``ErrorV1``, an unreachable service as 503 ``service_unavailable``, a message too large to send as 413.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

from faststream.nats import NatsBroker

from erpilot_contracts import json_input, requests
from erpilot_contracts.agent.v1 import GetSessionV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.requests import AGENT_SESSION, Endpoint, Rep, Req
from erpilot_contracts.sessions.v1 import GetSessionEventsV1
from erpilot_contracts.subjects import ping_subject
from erpilot_contracts.tools.v1 import get_tool
from erpilot_gateway.auth import User
from erpilot_gateway.problems import Problem
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.session_watch import SessionReplay, SessionWatch, replay_session, watch_session
from erpilot_platform.broker import PayloadTooLarge, ReplyError, ServiceUnavailable, call, payload_limit, request, send
from erpilot_platform.refusals import Refused
from erpilot_platform.runtime import PingV1
from erpilot_platform.tool_arguments import normalised_arguments

# The services readiness asks (each answers its ping from its database).
PINGED = ("agent", "approval", "erp")
# Sessions whose owner this process has seen (a session's owner never changes); cleared when it grows past this.
OWNERS_KEPT = 10_000


class Services:
    def __init__(self, broker: NatsBroker, timeout: float, assertions: RequesterAssertions):
        self.broker = broker
        self.timeout = timeout
        self.assertions = assertions
        self._owners: dict[str, str] = {}

    async def call(self, endpoint: Endpoint[Req, Rep], payload: Req) -> Rep:
        """The reply's ``data`` as ``endpoint``'s reply model; a service's refusal as the Problem of its ``ErrorV1``."""
        _check_storable(payload)
        with _as_problem():
            return await call(self.broker, endpoint, payload, timeout=self.timeout)

    async def data(self, endpoint: Endpoint[Req, Any], payload: Req) -> dict[str, Any]:
        """The reply's ``data`` exactly as the service sent it, unparsed: only for an answer that must reach the
        client byte for byte whatever this gateway's contracts know (the signed audit rows, ``routes/audit.py``).
        Everything else is read typed (``call``)."""
        _check_storable(payload)
        with _as_problem():
            reply = await send(self.broker, endpoint, payload, timeout=self.timeout)
        if not reply.ok:
            raise Problem.from_error(reply.error)
        return reply.data or {}

    async def vouch_call(self, user: User, session_id: str, call_id: str, tool: str, arguments: Any) -> str:
        """The requester assertion for ``user``'s one tool call ``call_id`` of ``tool`` with ``arguments`` in
        ``session_id``, once the session is found to be theirs (else the Problem 404 ``not_found``). It names the
        fingerprint of the normalised arguments, as the agent will send them on (``args``); arguments the tool does
        not take are refused here (422, as the agent would), since an assertion without them would bind none."""
        await self.check_owner(user, session_id)
        # Arguments no service could be sent are 413 before they are judged: the command carries them whole.
        if len(json.dumps(arguments)) > payload_limit(self.broker):
            raise Problem(413, "payload_too_large", "the request is too large to pass on to the service")
        try:
            normalised = normalised_arguments(tool, arguments)
        except Refused as refusal:
            raise Problem.from_error(refusal.reply().error) from None
        args = fingerprint(tool, get_tool(tool).schema_version, normalised)
        return self.assertions.for_call(user, session_id, call_id, tool, args=args)

    async def vouch_run(self, user: User, session_id: str, run_id: str, *, cancel: bool = False) -> str:
        """The requester assertion for ``user``'s chat run ``run_id`` in ``session_id`` (its calls), or with
        ``cancel`` for its cancel (purpose ``cancel``: its withdrawal only, never a call), once the session is
        found to be theirs."""
        await self.check_owner(user, session_id)
        if cancel:
            return self.assertions.for_cancel(user, session_id, run_id)
        return self.assertions.for_run(user, session_id, run_id)

    def run_id(self, session_id: str, message_id: str) -> str:
        """The run the message ``message_id`` starts in ``session_id`` (the same for a retry)."""
        return self.assertions.run_id(session_id, message_id)

    def issued_run(self, session_id: str, run_id: str) -> bool:
        """Whether ``run_id`` is a run this gateway started in ``session_id`` (``RequesterAssertions.issued_run``)."""
        return self.assertions.issued_run(session_id, run_id)

    def new_session_id(self, owner: str) -> str:
        """A new session id bound to ``owner`` by the gateway's MAC (``RequesterAssertions.new_session_id``)."""
        return self.assertions.new_session_id(owner)

    async def check_owner(self, user: User, session_id: str) -> None:
        """Nothing when ``session_id`` is ``user``'s; else the Problem 404 ``not_found`` of an unknown session. A
        session id the gateway bound to its owner is checked here by its MAC, never by the agent's word. A legacy
        id's first look asks the agent (the owner check of ``GET .../events``); a session's owner never changes,
        so the answer is kept and later calls cost no hop."""
        bound = self.assertions.session_owner(session_id, user.sub)
        if bound is not None:
            if not bound:
                raise Problem(404, "not_found", f"session {session_id} not found")
            return
        owner = self._owners.get(session_id)
        if owner is None:
            await self.call(AGENT_SESSION, GetSessionV1(session_id=session_id, owner=user.sub, summary_only=True))
            if len(self._owners) >= OWNERS_KEPT:
                self._owners.clear()
            self._owners[session_id] = owner = user.sub
        if owner != user.sub:
            raise Problem(404, "not_found", f"session {session_id} not found")

    def watch_session(self, session_id: str) -> AbstractAsyncContextManager[SessionWatch]:
        """A watch on the session's events, from now until the ``async with`` ends."""
        return watch_session(self.broker, session_id)

    def replay_session(self, session_id: str, owner: str, after_seq: int) -> AbstractAsyncContextManager[SessionReplay]:
        """``owner``'s session's events after ``after_seq``, stored then live, until the ``async with`` ends."""
        async def stored_after(seq: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
            page = await self.call(requests.AGENT_EVENTS, GetSessionEventsV1(
                session_id=session_id, owner=owner, after_seq=seq, limit=limit))
            return [event.model_dump(mode="json") for event in page.events], page.more

        return replay_session(self.broker, session_id, stored_after, after_seq)

    async def readiness(self) -> dict[str, str]:
        """``ok`` or why not, for the broker and each service that answers from its database."""
        connection = self.broker.config.connection_state
        connected = bool(connection) and connection.connection.is_connected
        checks = {"broker": "ok" if connected else "unavailable"}

        async def ping(service: str) -> None:
            try:
                reply = await request(self.broker, ping_subject(service), PingV1(), durable=False, timeout=2.0)
                checks[service] = "ok" if reply.ok else f"error: {reply.error.code}"
            except ServiceUnavailable as exc:
                checks[service] = f"unavailable: {exc}"
            except Exception as exc:  # the broker itself may be away
                checks[service] = f"unavailable: {exc.__class__.__name__}"

        if connected:
            await asyncio.gather(*(ping(service) for service in PINGED))
        return checks


@contextmanager
def _as_problem() -> Iterator[None]:
    """A refusal, an unreachable service or a message too large to send, as the Problem the HTTP API answers."""
    try:
        yield
    except ReplyError as exc:
        raise Problem.from_error(exc.error) from None
    except ServiceUnavailable as exc:
        raise Problem(503, "service_unavailable", str(exc)) from None
    except PayloadTooLarge:
        raise Problem(413, "payload_too_large", "the request is too large to pass on to the service") from None


def _check_storable(payload: Any) -> None:
    try:  # what reaches a service must be storable: no NUL, no integer beyond 64 bits (path, query, body)
        json_input.check(payload.model_dump(mode="json"))
    except json_input.BadInput as exc:
        raise Problem(exc.status, exc.code, str(exc)) from None
