"""The real gateway app in-process, with the agent, approval and ERP services replaced by an in-memory fake.

The fake answers the gateway's NATS requests (``Services.query``/``command``) with the shapes the real
services return (``ApprovalRecordV1``, ``OperationStatusV1``, session views), so the console and the
approval page can be tested in every state without waiting for a real approval to expire. The session
event stream is the real SSE bridge: tests publish SessionEventV1 bodies on the session's JetStream
subject, as the agent's outbox relay does.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import uvicorn

from erpilot.stack.stack import free_port
from erpilot.stack.tokens import make_token
from erpilot_contracts import subjects
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from erpilot_gateway.app import create_app
from erpilot_gateway.problems import Problem
from erpilot_gateway.session_watch import replay_session
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.grants import new_keypair_env

SECRET = "browser-secret-" + "y" * 32


def now() -> datetime:
    return datetime.now(UTC)


def submit_order_approval(*, requested_by: str = "req-1", session_id: str = "ses_browser",
                          note: str = "Deliver to the back door", customer_name: str = "Acme Office Supplies GmbH",
                          expires_in: float = 900, status: str = "pending", required_roles=("approver", "manager"),
                          **overrides: Any) -> dict[str, Any]:
    """An approval record of submit_order shaped like the approval service's ``ApprovalRecordV1``."""
    pending_id = overrides.pop("pending_id", f"apr_{uuid.uuid4().hex[:12]}")
    arguments = {"draft_id": "D-1002", "revision": 3}
    lines = [
        {"item_number": 1, "sku": "SKU-PAPER-A4", "name": "Copy paper A4, 500 sheets", "qty": 200,
         "unit_price_minor": 499, "discount_pct": 5, "line_total_minor": 94810, "stock_before": 1200},
        {"item_number": 2, "sku": "SKU-PEN-BLUE", "name": "Ballpoint pen, blue", "qty": 340,
         "unit_price_minor": 89, "discount_pct": 5, "line_total_minor": 28640, "stock_before": 5000},
    ]
    created = now()
    record = {
        "pending_id": pending_id, "call_id": f"call_{uuid.uuid4().hex[:8]}", "session_id": session_id,
        "tool": "submit_order", "tool_schema_version": 1, "arguments": arguments,
        "fingerprint": compute_fingerprint("submit_order", 1, arguments),
        "operation_id": f"op_{uuid.uuid4().hex[:12]}", "risk": "medium",
        "preview": {
            "operation": "Submit order", "object": "Draft D-1002 revision 3", "target": customer_name,
            "amount_minor": 123450, "currency": "EUR",
            "effects": [{"label": "stock SKU-PAPER-A4", "before": 1200, "after": 1000, "unit": "pcs"},
                        {"label": "stock SKU-PEN-BLUE", "before": 5000, "after": 4660, "unit": "pcs"}],
            "notes": [f"2 line(s) for {customer_name} (C-1001), total 1,234.50 EUR",
                      "The payment of 1,234.50 EUR is captured when the order is placed."],
            "details": {"draft_id": "D-1002", "revision": 3, "customer_id": "C-1001",
                        "customer_name": customer_name, "lines": lines, "note": note,
                        "valid_until": (created + timedelta(days=7)).isoformat(), "stock_check": "exact"},
        },
        "required_roles": list(required_roles), "requested_by": requested_by,
        "created_at": created.isoformat(), "expires_at": (created + timedelta(seconds=expires_in)).isoformat(),
        "status": status, "decided_by": None, "decided_at": None, "comment": None, "policy_version": "test",
        "superseded_by": None, "supersedes": None,
    }
    record.update(overrides)
    return record


@dataclass
class FakeServices:
    """Stands in for ``erpilot_gateway.services.Services``: the agent, approval and ERP answers."""

    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    runs: itertools.count = field(default_factory=lambda: itertools.count(1))
    separation_of_duties: set[str] = field(default_factory=set)  # pending ids under SoD
    bulk_decisions: list[list[str]] = field(default_factory=list)  # the pending ids of each accepted bulk decision
    voted: set[tuple[str, str]] = field(default_factory=set)  # (pending_id, sub) of quorum votes cast
    tool_calls: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (session_id, call_id)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # the agent's store, per session
    audit: list[dict[str, Any]] = field(default_factory=list)  # the audit log's rows, as GET /v1/audit items
    delegations: dict[str, dict[str, Any]] = field(default_factory=dict)  # DelegationV1 bodies by id
    delegation_commands: list[Any] = field(default_factory=list)  # every give / revoke command received
    standing: dict[str, dict[str, Any]] = field(default_factory=dict)  # StandingApprovalV1 bodies by id
    broker: Any = None  # the gateway's own broker: the session event stream stays the real one

    def add_approval(self, record: dict[str, Any], *, separation_of_duties: bool = False) -> dict[str, Any]:
        self.approvals[record["pending_id"]] = record
        self.record_audit("request", record, record["requested_by"])
        if separation_of_duties:
            self.separation_of_duties.add(record["pending_id"])
        return record

    def record_audit(self, kind: str, record: dict[str, Any], actor: str | None) -> dict[str, Any]:
        """Append a row shaped like the approval service's ``AuditRow.to_wire()`` (its hash chains here too)."""
        prev_hash = self.audit[-1]["hash"] if self.audit else "0" * 64
        row = {"seq": len(self.audit) + 1, "at": now().isoformat(), "kind": kind, "pending_id": record["pending_id"],
               "operation_id": record["operation_id"], "actor": actor, "data": {}, "prev_hash": prev_hash}
        row["hash"] = hashlib.sha256((prev_hash + json.dumps(row, sort_keys=True)).encode()).hexdigest()
        row["signature"] = "fake-signature"
        self.audit.append(row)
        return row

    def lent_to(self, sub: str) -> list[dict[str, Any]]:
        """The delegations in force to ``sub`` (not revoked, ``until`` ahead)."""
        return [d for d in self.delegations.values() if d["to"] == sub and d["revoked_at"] is None
                and datetime.fromisoformat(d["until"]) > now()]

    def delegator_for(self, record: dict[str, Any], actor) -> str | None:
        """Whom ``actor`` may decide ``record`` for as a delegate (None: in their own right, or nobody)."""
        if self._holds_role(record, actor.roles):
            return None
        return next((d["from"] for d in self.lent_to(actor.sub) if self._holds_role(record, d["roles"])
                     and (d["tools"] is None or record["tool"] in d["tools"])), None)

    def for_actor(self, record: dict[str, Any], actor) -> dict[str, Any]:
        """The record with ``can_decide``/``cannot_decide_reason`` for ``actor``, in the approval service's
        order (``erpilot_approval.domain.eligibility``): role (own or a delegator's), separation of duties,
        status, deadline."""
        delegator = self.delegator_for(record, actor)
        if not self._holds_role(record, actor.roles) and delegator is None:
            reason = "role"
        elif record["pending_id"] in self.separation_of_duties and actor.sub == record["requested_by"]:
            reason = "separation_of_duties"
        elif record["status"] != "pending":
            reason = record["status"] if record["status"] in ("expired", "superseded") else "already_decided"
        elif now() >= datetime.fromisoformat(record["expires_at"]):
            reason = "expired"
        elif (record["pending_id"], actor.sub) in self.voted:
            reason = "already_voted"
        else:
            reason = None
        return {**record, "can_decide": reason is None, "cannot_decide_reason": reason,
                "can_decide_for": delegator if reason is None else None}

    async def data(self, endpoint, payload) -> dict[str, Any]:
        return self._answer(endpoint.subject, payload)

    async def call(self, endpoint, payload):
        """The typed request, as ``Services.call``: the answer parsed into its declared reply model."""
        return endpoint.reply.model_validate(self._answer(endpoint.subject, payload))

    def replay_session(self, session_id: str, owner: str, after_seq: int):
        """``Services.replay_session``: the real replay (live on the gateway's broker), reading this fake's store."""
        async def stored_after(seq: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
            after = [e for e in self.events.get(session_id, []) if e["seq"] > seq]
            return after[:limit], len(after) > limit

        return replay_session(self.broker, session_id, stored_after, after_seq)

    def new_session_id(self, owner: str) -> str:
        """``Services.new_session_id``: the fake agent checks no owner MAC, so a plain id."""
        return f"ses_{uuid.uuid4().hex[:20]}"

    def vouch(self, user, session_id: str) -> str:
        """``Services.vouch``: the fake agent checks no requester assertion."""
        return f"assertion-of-{user.sub}-in-{session_id}"

    async def vouch_call(self, user, session_id: str, call_id: str, tool: str, arguments: Any) -> str:
        """``Services.vouch_call``: the fake agent checks no requester assertion."""
        return f"assertion-of-{user.sub}-in-{session_id}-for-{call_id}"

    async def vouch_run(self, user, session_id: str, run_id: str, *, cancel: bool = False) -> str:
        """``Services.vouch_run``: the fake agent checks no requester assertion."""
        return f"assertion-of-{user.sub}-in-{session_id}-for-{run_id}"

    def run_id(self, session_id: str, message_id: str) -> str:
        """``Services.run_id``: one run per message, the same for a retry."""
        return f"run_{uuid.uuid5(uuid.NAMESPACE_URL, session_id + ':' + message_id).hex[:24]}"

    def _answer(self, subject: str, p) -> dict[str, Any]:
        if subject == subjects.AGENT_CMD_CREATE_SESSION:
            self.sessions[p.session_id] = {"session_id": p.session_id, "owner": p.owner, "title": p.title,
                                           "created_at": now().isoformat(), "last_seq": 0}
            return {"session_id": p.session_id}
        if subject == subjects.AGENT_QUERY_SESSIONS:  # newest first: insertion order reversed
            mine = [s for s in reversed(self.sessions.values()) if s["owner"] == p.owner
                    and (not p.q or p.q.lower() in (s["title"] or "").lower())]
            return {"items": mine[:p.limit], "next_cursor": None}
        if subject == subjects.AGENT_QUERY_SESSION:
            session = self.sessions.get(p.session_id)
            if session is None or session["owner"] != p.owner:
                raise Problem(404, "not_found", f"session {p.session_id} not found")
            return {**session, "messages": [], "tool_calls": [], "pending_approvals": [], "run_status": "idle"}
        if subject == subjects.AGENT_QUERY_TOOL_CALL:
            session = self.sessions.get(p.session_id)
            call = self.tool_calls.get((p.session_id, p.call_id))
            if session is None or session["owner"] != p.owner or call is None:
                raise Problem(404, "not_found", f"tool call {p.call_id} not found")
            return call
        if subject == subjects.AGENT_CMD_POST_MESSAGE:
            session = self.sessions.get(p.session_id)
            if session is None or session["owner"] != p.owner:
                raise Problem(404, "not_found", f"session {p.session_id} not found")
            self.messages.append({"session_id": p.session_id, "text": p.text})
            return {"run_id": f"run_{next(self.runs)}"}
        if subject == subjects.APPROVAL_CMD_DELEGATE:
            return self._give(p)
        if subject == subjects.APPROVAL_CMD_REVOKE_DELEGATION:
            self.delegation_commands.append(p)
            found = self.delegations.get(p.delegation_id)
            if found is None or found["from"] != p.actor.sub:
                raise Problem(404, "not_found", "delegation not found")
            found["revoked_at"] = found["revoked_at"] or now().isoformat()
            return found
        if subject == subjects.APPROVAL_QUERY_STANDING:
            return {"items": [s for s in reversed(self.standing.values()) if s["revoked_at"] is None
                              and ("admin" in p.actor.roles or s["given_by"] == p.actor.sub)]}
        if subject == subjects.APPROVAL_CMD_REVOKE_STANDING:
            found = self.standing.get(p.standing_id)
            if found is None or (found["given_by"] != p.actor.sub and "admin" not in p.actor.roles):
                raise Problem(404, "not_found", "standing approval not found")
            found["revoked_at"] = found["revoked_at"] or now().isoformat()
            return found
        if subject == subjects.APPROVAL_QUERY_DELEGATIONS:
            mine = [d for d in self.delegations.values() if p.actor.sub in (d["from"], d["to"])
                    and d["revoked_at"] is None and datetime.fromisoformat(d["until"]) > now()]
            return {"items": list(reversed(mine))}
        if subject == subjects.APPROVAL_QUERY_GET:
            record = self.approvals.get(p.pending_id)
            if record is None or not (self._holds_role(record, p.actor.roles) or record["requested_by"] == p.actor.sub
                                      or "admin" in p.actor.roles or self.delegator_for(record, p.actor)):
                raise Problem(404, "not_found", f"approval {p.pending_id} not found")
            return self.for_actor(record, p.actor)
        if subject == subjects.APPROVAL_QUERY_LIST:
            items = [self.for_actor(r, p.actor) for r in self.approvals.values()
                     if (self._holds_role(r, p.actor.roles) or self.delegator_for(r, p.actor))
                     and (p.status is None or r["status"] == p.status)]
            return {"items": sorted(items, key=lambda r: r["created_at"], reverse=True)}
        if subject == subjects.APPROVAL_REQ_DECIDE:
            return self._decide(p)
        if subject == subjects.APPROVAL_CMD_DECIDE_MANY:
            return self._decide_many(p)
        if subject == subjects.APPROVAL_QUERY_AUDIT:  # admins only, like the approval service
            if "admin" not in p.actor.roles:
                raise Problem(403, "forbidden", "the audit log is for admins")
            return {"items": [row for row in self.audit if (p.pending_id is None or row["pending_id"] == p.pending_id)
                              and (p.operation_id is None or row["operation_id"] == p.operation_id)][:p.limit]}
        if subject == subjects.ERP_QUERY_OPERATION:
            operation = self.operations.get(p.operation_id)
            if operation is None:
                raise Problem(404, "not_found", f"operation {p.operation_id} not found")
            return operation
        raise Problem(503, "service_unavailable", f"the fake has no answer for {subject}")

    @staticmethod
    def _holds_role(record: dict[str, Any], roles: list[str]) -> bool:
        return any(role in record["required_roles"] for role in roles)

    def _decide_many(self, p) -> dict[str, Any]:
        """All or none, like the approval service: every item is checked before any is decided."""
        singles = [SimpleNamespace(pending_id=i.pending_id, fingerprint=i.fingerprint, action=p.action,
                                   comment=p.comment, actor=p.actor) for i in p.items]
        for index, single in enumerate(singles):
            try:
                self._decide(single, dry_run=True)
            except Problem as problem:
                raise Problem(problem.status, problem.code, f"item {index}: {problem.detail}",
                              pending_id=single.pending_id, index=index) from None
        self.bulk_decisions.append([single.pending_id for single in singles])
        return {"action": p.action, "items": [self._decide(single) for single in singles]}

    def _give(self, p) -> dict[str, Any]:
        """Like the approval service's give: the giver's deciding roles; 422 to oneself or into the past."""
        self.delegation_commands.append(p)
        roles = [role for role in ("approver", "manager") if role in p.actor.roles]
        if not roles:
            raise Problem(403, "forbidden", "only an approver or a manager may delegate")
        if p.to == p.actor.sub:
            raise Problem(422, "delegation_to_self", "a delegation goes to someone else")
        if p.until <= now():
            raise Problem(422, "delegation_in_past", f"until {p.until.isoformat()} is not in the future")
        given = {"schema_version": 1, "delegation_id": p.delegation_id, "from": p.actor.sub, "to": p.to,
                 "until": p.until.isoformat(), "tools": p.tools, "roles": roles, "created_at": now().isoformat(),
                 "revoked_at": None}
        self.delegations[p.delegation_id] = given
        return given

    def _decide(self, p, *, dry_run: bool = False) -> dict[str, Any]:
        record = self.approvals.get(p.pending_id)
        if record is None:
            raise Problem(404, "not_found", f"approval {p.pending_id} not found")
        delegator = self.delegator_for(record, p.actor)
        if not self._holds_role(record, p.actor.roles) and delegator is None:
            raise Problem(403, "forbidden", "deciding needs a required role")
        if record["status"] != "pending":
            raise Problem(409, "already_decided", f"already {record['status']}")
        if now() >= datetime.fromisoformat(record["expires_at"]):
            raise Problem(409, "expired", "the approval expired")
        if p.fingerprint != record["fingerprint"]:
            raise Problem(409, "stale_fingerprint", "the fingerprint differs from the approval's")
        if dry_run:
            return record
        if p.action == "approve" and record.get("approvals_required", 1) > 1:  # a quorum vote
            role = next(role for role in record["required_roles"] if role in p.actor.roles)
            record.setdefault("votes", []).append({"sub": p.actor.sub, "role": role, "action": "approve",
                                                   "at": now().isoformat(), "comment": p.comment})
            record["approvals_received"] = len({v["sub"] for v in record["votes"] if v["action"] == "approve"})
            self.voted.add((p.pending_id, p.actor.sub))
            self.record_audit("vote", record, p.actor.sub)
            if record["approvals_received"] < record["approvals_required"]:
                return record
        status = {"approve": "approved", "reject": "rejected", "cancel": "cancelled"}[p.action]
        record.update(status=status, decided_by=p.actor.sub, decided_at=now().isoformat(), comment=p.comment,
                      decided_on_behalf_of=delegator)
        self.decisions.append({"pending_id": p.pending_id, "action": p.action, "fingerprint": p.fingerprint,
                               "comment": p.comment, "by": p.actor.sub})
        self.record_audit("decision", record, p.actor.sub)
        if status == "approved":
            self.operations[record["operation_id"]] = {
                "operation_id": record["operation_id"], "tool": record["tool"], "status": "prepared",
                "requested_by": record["requested_by"], "session_id": record["session_id"]}
        return record


class ConsoleServer:
    """The gateway app served by uvicorn in a thread, its other services faked."""

    def __init__(self, nats_url: str):
        self.port = free_port()
        self.nats_url = nats_url
        self.fake = FakeServices()
        settings = GatewaySettings(nats_url=nats_url, auth_secret=SECRET, http_port=self.port,
                                   public_url=self.base_url, assertion_signing_key=new_keypair_env(
                                       "ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"])
        self.app = create_app(settings)
        self.fake.broker = self.app.state.broker
        self.app.state.services = self.fake
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="console-gateway", daemon=True)
        self.seq: dict[str, int] = {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        run_async(_ensure_streams(self.nats_url))
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the in-process gateway did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def new_session(self, owner: str, title: str | None = None) -> str:
        session_id = f"ses_{uuid.uuid4().hex[:20]}"
        self.fake.sessions[session_id] = {"session_id": session_id, "owner": owner, "title": title,
                                          "created_at": now().isoformat(), "last_seq": 0}
        return session_id

    def publish(self, session_id: str, *events: tuple[str, dict[str, Any]]) -> None:
        """Append ``(type, data)`` events to the session's store with the next gap-free seqs, then publish them live
        (as the agent does: stored first, published after the commit)."""
        bodies = []
        for event_type, data in events:
            self.seq[session_id] = self.seq.get(session_id, 0) + 1
            bodies.append({"seq": self.seq[session_id], "type": event_type, "session_id": session_id,
                           "occurred_at": now().isoformat(), "data": data, "schema_version": 1})
        self.fake.events.setdefault(session_id, []).extend(bodies)
        run_async(_publish(self.nats_url, subjects.session_events_subject(session_id), bodies))


def run_async(coro) -> Any:
    """Run a coroutine to completion from sync test code (Playwright's sync API owns this thread's loop)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def _ensure_streams(nats_url: str) -> None:
    from faststream.nats import NatsBroker

    from erpilot.stack.nats_credentials import migrate_jetstream_on

    broker = NatsBroker(nats_url)
    await broker.connect()
    try:
        await migrate_jetstream_on(broker.config.connection_state.stream)
    finally:
        await broker.stop()


async def _publish(nats_url: str, subject: str, bodies: list[dict[str, Any]]) -> None:
    import nats

    connection = await nats.connect(nats_url)
    try:
        for body in bodies:
            await connection.publish(subject, json.dumps(body).encode())
        await connection.flush()
    finally:
        await connection.close()


def tok(sub: str, *roles: str) -> str:
    """A console token signed with the harness secret."""
    return make_token(SECRET, sub, list(roles))
