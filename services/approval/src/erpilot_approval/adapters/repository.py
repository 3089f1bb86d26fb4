"""Persistence of approvals and their decisions (approval schema). Time always comes from the database."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy import and_, func, or_, select, text, union
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from erpilot_approval.adapters import sql
from erpilot_approval.adapters.tables import (
    ESCALATION_DUE,
    ROLES,
    approvals,
    edits,
    named_in_arguments,
    role_predicate,
)
from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.delegation import RoleScope
from erpilot_approval.domain.edits import EditIntent
from erpilot_approval.domain.votes import Vote
from erpilot_approval.service_layer.ports import ListFilter
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_platform import raw_sql
from erpilot_platform.db import driver_connection
from erpilot_platform.telemetry import trace_carrier

_DOMAIN_FIELDS = tuple(f.name for f in fields(PendingApproval) if f.name != "votes")  # votes: their own table
_NEW_COLUMNS = (*_DOMAIN_FIELDS, "trace_context")  # what ``insert_new`` stores
_NEWEST_FIRST = (approvals.c.created_at.desc(), approvals.c.pending_id.desc())


def to_domain(row: Any, cast: tuple[Vote, ...] = ()) -> PendingApproval:
    mapping = getattr(row, "_mapping", row)  # a SQLAlchemy row, or an asyncpg record (``sql``)
    values = {name: mapping[name] for name in _DOMAIN_FIELDS}
    values["required_roles"] = list(values["required_roles"])
    values["editors"] = tuple(values["editors"] or ())
    return PendingApproval(**values, votes=cast)


async def votes_of(conn: AsyncConnection, pending_ids: list[str]) -> dict[str, tuple[Vote, ...]]:
    """Every vote on these approvals, oldest first, by ``pending_id``."""
    if not pending_ids:
        return {}
    rows = await (await driver_connection(conn)).fetch(sql.VOTES_OF, pending_ids)
    found: dict[str, list[Vote]] = {}
    for row in rows:
        found.setdefault(row["pending_id"], []).append(Vote(
            sub=row["voter"], role=row["role"], action=row["action"], fingerprint=row["fingerprint"],
            at=row["voted_at"], comment=row["comment"], on_behalf_of=row["on_behalf_of"]))
    return {pending_id: tuple(items) for pending_id, items in found.items()}


async def _with_votes(conn: AsyncConnection, rows: list[Any]) -> list[PendingApproval]:
    cast = await votes_of(conn, [_pending_id(row) for row in rows])
    return [to_domain(row, cast.get(_pending_id(row), ())) for row in rows]


def _pending_id(row: Any) -> str:
    return row["pending_id"] if isinstance(row, asyncpg.Record) else row.pending_id


async def get(conn: AsyncConnection, pending_id: str, *, lock: bool = False) -> PendingApproval | None:
    """One approval with its votes; ``lock=True`` takes its row lock (SELECT ... FOR UPDATE) until the
    transaction ends (votes are written only under that lock, so they are read after it)."""
    row = await (await driver_connection(conn)).fetchrow(sql.LOCK_APPROVAL if lock else sql.GET_APPROVAL, pending_id)
    return (await _with_votes(conn, [row]))[0] if row is not None else None


async def pending_of_calls(conn: AsyncConnection, session_id: str, call_ids: list[str]) -> list[str]:
    """The pending approvals (every version) of these calls of this session, in ``pending_id`` order."""
    if not call_ids:
        return []
    rows = await conn.scalars(select(approvals.c.pending_id).where(
        approvals.c.session_id == session_id, approvals.c.call_id.in_(call_ids), approvals.c.status == "pending")
        .order_by(approvals.c.pending_id))
    return list(rows)


async def get_by_operation(conn: AsyncConnection, operation_id: str, *,
                           votes: bool = True) -> PendingApproval | None:
    row = await (await driver_connection(conn)).fetchrow(sql.GET_BY_OPERATION, operation_id)
    if row is None or not votes:
        return to_domain(row) if row is not None else None
    return (await _with_votes(conn, [row]))[0]


async def append_vote(conn: AsyncConnection, pending_id: str, vote: Vote) -> None:
    """One vote row (the caller holds the approval's row lock; one per person by a unique constraint)."""
    await (await driver_connection(conn)).execute(
        sql.APPEND_VOTE, pending_id, vote.sub, vote.role, vote.action, vote.fingerprint, vote.comment, vote.at,
        vote.on_behalf_of)


async def first_of_call(conn: AsyncConnection, session_id: str, call_id: str) -> PendingApproval | None:
    row = await (await driver_connection(conn)).fetchrow(sql.FIRST_OF_CALL, session_id, call_id)
    return to_domain(row) if row is not None else None


async def insert_new(conn: AsyncConnection, approval: PendingApproval, *,
                     trace_context: dict[str, str] | None = None) -> bool:
    """Insert unless an approval for its ``operation_id`` exists (then False: a concurrent twin won).

    ``trace_context``: the trace later steps continue (default: the current one).
    """
    values = {name: getattr(approval, name) for name in _DOMAIN_FIELDS}
    values["editors"] = list(approval.editors)
    values["trace_context"] = trace_context if trace_context is not None else trace_carrier()
    raw = await driver_connection(conn)
    inserted = await raw.fetchval(sql.insert_new(_NEW_COLUMNS), *raw_sql.values(approvals, _NEW_COLUMNS, values))
    return inserted is not None


async def trace_context(conn: AsyncConnection, pending_id: str) -> dict[str, str] | None:
    """The trace context stored with an approval (None for approvals stored before traces were)."""
    return await (await driver_connection(conn)).fetchval(sql.TRACE_CONTEXT, pending_id)


async def count_pending(conn: AsyncConnection) -> int:
    """How many approvals wait for a decision (served by the partial deadline index)."""
    return await conn.scalar(select(func.count()).select_from(approvals).where(approvals.c.status == "pending"))


async def save_outcome(conn: AsyncConnection, approval: PendingApproval, grant: GrantV1 | None = None) -> None:
    """Store how an approval left ``pending`` (the caller holds its row lock); expires_at is never written."""
    args = [approval.pending_id, approval.status, approval.decided_by, approval.decided_at, approval.comment,
            approval.superseded_by, approval.decided_on_behalf_of]
    if grant is not None:
        args.append(json.dumps(grant.model_dump(mode="json")))
    await (await driver_connection(conn)).execute(sql.SAVE_OUTCOME if grant is None else sql.SAVE_OUTCOME_WITH_GRANT,
                                                  *args)


async def append_decision(conn: AsyncConnection, pending_id: str, *, actor: str, action: str, fingerprint: str,
                          comment: str | None, at: datetime, on_behalf_of: str | None = None) -> None:
    """Append to the decision log (never updated or deleted)."""
    await (await driver_connection(conn)).execute(
        sql.APPEND_DECISION, pending_id, actor, action, fingerprint, comment, at, on_behalf_of)


async def save_escalation(conn: AsyncConnection, approval: PendingApproval) -> None:
    """Store an escalation (the caller holds the row lock): the roles that may decide and when; nothing else."""
    await conn.execute(approvals.update().where(approvals.c.pending_id == approval.pending_id).values(
        required_roles=approval.required_roles, escalated_at=approval.escalated_at))


async def lock_due_escalations(conn: AsyncConnection, now: datetime, limit: int) -> list[PendingApproval]:
    """Pending, not yet escalated approvals whose ``escalate_at`` is at or before ``now`` and whose deadline is
    not (those expire instead), locked, earliest first; rows another transaction holds (a decision, another
    replica's sweeper) are skipped."""
    stmt = (select(approvals)
            .where(text(ESCALATION_DUE), approvals.c.escalate_at <= now, approvals.c.expires_at > now)
            .order_by(approvals.c.escalate_at).limit(limit)
            .with_for_update(skip_locked=True))
    return await _with_votes(conn, list(await conn.execute(stmt)))


async def seconds_to_next_escalation(conn: AsyncConnection) -> float | None:
    """Seconds from the database's now to the earliest escalation due (negative when overdue), or None; an
    approval past its deadline is the expiry sweeper's, not counted."""
    value = await (await driver_connection(conn)).fetchval(sql.SECONDS_TO_NEXT_ESCALATION)
    return float(value) if value is not None else None


async def lock_due(conn: AsyncConnection, now: datetime, limit: int) -> list[PendingApproval]:
    """Pending approvals whose deadline is at or before ``now``, locked; rows another replica holds are skipped."""
    stmt = (select(approvals)
            .where(approvals.c.status == "pending", approvals.c.expires_at <= now)
            .order_by(approvals.c.expires_at).limit(limit)
            .with_for_update(skip_locked=True))
    return await _with_votes(conn, list(await conn.execute(stmt)))


async def seconds_to_next_deadline(conn: AsyncConnection) -> float | None:
    """Seconds from the database's now to the earliest pending deadline (negative when overdue), or None."""
    value = await (await driver_connection(conn)).fetchval(sql.SECONDS_TO_NEXT_DEADLINE)
    return float(value) if value is not None else None


def _filtered(branch: Any, where: ListFilter) -> Any:
    for column, value in ((approvals.c.session_id, where.session_id), (approvals.c.tool, where.tool),
                          (approvals.c.requested_by, where.requested_by)):
        if value is not None:
            branch = branch.where(column == value)
    if where.since is not None:
        branch = branch.where(approvals.c.created_at >= where.since)
    if where.before is not None:
        at, pending_id = where.before
        branch = branch.where(or_(approvals.c.created_at < at,
                                  and_(approvals.c.created_at == at, approvals.c.pending_id < pending_id)))
    return branch


async def list_decidable(conn: AsyncConnection, roles: list[str], *, status: str, where: ListFilter,
                         limit: int, delegated: Sequence[RoleScope] = ()) -> list[PendingApproval]:
    """Approvals in ``status`` that one of ``roles`` may decide, or one of a delegated scope's roles for its
    tools, newest first.

    One branch per role (and per delegated scope's role, narrowed to its tools), each served by that role's partial
    index (status, created_at DESC) and stopping after ``limit`` rows; the union of the branches (duplicates
    dropped) is cut to ``limit`` again.
    """
    reaches: list[tuple[str, tuple[str, ...] | None]] = [(role, None) for role in ROLES if role in roles]
    reaches += [(role, scope.tools) for scope in delegated for role in ROLES if role in scope.roles]
    if not reaches:
        return []
    branches = []
    for role, tools in dict.fromkeys(reaches):
        branch = (select(approvals.c.pending_id, approvals.c.created_at)
                  .where(approvals.c.status == status, text(role_predicate(role))))
        if tools is not None:
            branch = branch.where(approvals.c.tool.in_(tools))
        branch = _filtered(branch, where)
        branches.append(branch.order_by(*_NEWEST_FIRST).limit(limit))
    top = (branches[0] if len(branches) == 1 else union(*branches)).subquery("top")
    picked = (select(top.c.pending_id).order_by(top.c.created_at.desc(), top.c.pending_id.desc()).limit(limit)
              ).subquery("picked")
    stmt = (select(approvals).join(picked, picked.c.pending_id == approvals.c.pending_id)
            .order_by(*_NEWEST_FIRST))
    return await _with_votes(conn, list(await conn.execute(stmt)))



async def naming(conn: AsyncConnection, *, draft_ids: list[str], order_ids: list[str], roles: list[str],
                 statuses: tuple[str, ...], limit: int) -> list[PendingApproval]:
    """Approvals in ``statuses`` whose arguments name one of these drafts or orders and that one of ``roles`` may
    decide, newest first (each id through its expression index, ``tables.named_in_arguments``)."""
    held = [role for role in ROLES if role in roles]
    names = [named_in_arguments(key).in_(ids) for key, ids in (("draft_id", draft_ids), ("order_id", order_ids))
             if ids]
    if not held or not names:
        return []
    stmt = (select(approvals).where(or_(*names), approvals.c.status.in_(statuses),
                                    approvals.c.required_roles.overlap(held))
            .order_by(*_NEWEST_FIRST).limit(limit))
    return await _with_votes(conn, list(await conn.execute(stmt)))


async def edit_intent(conn: AsyncConnection, operation_id: str) -> EditIntent | None:
    row = (await conn.execute(select(edits).where(edits.c.operation_id == operation_id))).first()
    return EditIntent(**row._mapping) if row is not None else None


async def add_edit_intent(conn: AsyncConnection, intent: EditIntent) -> bool:
    """Record an edit intent unless one for its operation exists (then False: the first one stands)."""
    stmt = (insert(edits).values(**asdict(intent)).on_conflict_do_nothing(index_elements=[edits.c.operation_id])
            .returning(edits.c.operation_id))
    return (await conn.execute(stmt)).first() is not None


async def refuse_edit_intent(conn: AsyncConnection, operation_id: str, refusal: dict[str, Any]) -> None:
    await conn.execute(edits.update().where(edits.c.operation_id == operation_id).values(refusal=refusal))


async def forget_edit_intent(conn: AsyncConnection, operation_id: str) -> None:
    """Drop an intent still waiting for the ledger (one that has an outcome is kept)."""
    await conn.execute(edits.delete().where(edits.c.operation_id == operation_id, edits.c.refusal.is_(None)))
