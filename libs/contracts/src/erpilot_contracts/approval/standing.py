"""Standing approvals (SPEC §11, issue 34): commands, query and records (schema_version 1).

An approver or manager approves in advance one write tool in one session, up to an amount, until a time. Only the
gateway sends these, always for the authenticated person (``actor``: sub and roles from the verified token).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from erpilot_contracts.approval.v1 import Actor
from erpilot_contracts.base import Message


class GiveStandingApprovalV1(Message):
    """``actor`` approves in advance the writes of ``tool`` in ``session_id`` whose ledger preview shows at most
    ``max_amount_minor`` (None: any amount the actor may decide) until ``until``. ``standing_id`` is chosen by the
    gateway, so a redelivered command stores one standing approval."""

    standing_id: str
    session_id: str
    tool: str
    max_amount_minor: int | None = None
    until: datetime
    actor: Actor


class RevokeStandingApprovalV1(Message):
    """Its giver (or an admin) ends a standing approval now (someone else's: 404, like an unknown one)."""

    standing_id: str
    actor: Actor


class ListStandingApprovalsV1(Message):
    """The standing approvals in force the actor gave (an admin: everyone's)."""

    actor: Actor


class StandingApprovalV1(Message):
    """One standing approval: what it approves at once (``decided_by`` ``standing:<standing_id>``, on behalf of
    ``given_by``) while in force."""

    standing_id: str
    given_by: str = Field(description="The giver: the approvals it decides are decided on their behalf.")
    session_id: str
    tool: str
    max_amount_minor: int | None = Field(None, description="The largest preview amount it approves; None: any "
                                                           "amount the giver may decide.")
    until: datetime
    roles: list[str] = Field(description="The giver's deciding roles when giving (a write uses those the giver "
                                         "still holds then).")
    created_at: datetime
    revoked_at: datetime | None = None


class StandingApprovalPageV1(Message):
    """The answer to a ``ListStandingApprovalsV1``: newest first."""

    items: list[StandingApprovalV1]


class EndRunV1(Message):
    """The run's owner cancelled ``run_id`` (``POST /v1/sessions/{sid}/runs/{run_id}/cancel``): from now on no
    standing approval approves a call of that run (``<run_id>:*``); such a request waits for a person. Sent by the
    gateway after its ownership check, with the cancel's assertion (purpose ``cancel``), before it asks the agent
    to cancel: the agent, which holds the run's assertion, neither carries nor can withhold it."""

    session_id: str
    run_id: str
    owner: str = Field(description="The session's owner, who cancelled the run (the assertion must name them).")
    assertion: str = Field(description="The gateway's assertion of the cancel of this run (purpose cancel).")


class StandingRunV1(Message):
    """What standing approvals did for one chat run: how many of its writes they approved, and whether it ended."""

    session_id: str
    run_id: str
    standing_approved: int = Field(description="Writes of the run a standing approval voted for.")
    ended_at: datetime | None = None
    ended_by: str | None = None
