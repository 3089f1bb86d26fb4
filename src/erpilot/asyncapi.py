"""The AsyncAPI document of Erpilot's NATS interface (``erpilot docs``; committed as docs/asyncapi/erpilot.json).

faststream writes it from each service's real endpoints: the services are composed with ``build()``
(nothing connects), so every command, query and event subscription the ServiceBus registered appears
with its contract model as the payload. Events leave through outboxes rather than faststream
publishers, so they are declared below, each with its contract model.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from faststream.specification import AsyncAPI, Specification

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalRequestedV1,
    ApprovalRequestRefusedV1,
    ApprovalResolvedV1,
    ApprovalVotedV1,
    RequestApprovalV1,
)
from erpilot_contracts.base import Message
from erpilot_contracts.erp.v1 import CommitOperationV1, OperationStatusV1
from erpilot_contracts.sessions.v1 import SessionEventV1

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "asyncapi" / "erpilot.json"
# The server named in the document (deployments point services at their own NATS).
SERVER = "nats://127.0.0.1:4222"
# What each service publishes from its transactional outbox: (subject, model, description).
PUBLISHED: dict[str, list[tuple[str, type[Message], str]]] = {
    "erp": [(subjects.ERP_EVT_OPERATION_FINISHED, OperationStatusV1,
             "An operation was committed or rejected (its final status)."),
            (subjects.APPROVAL_CMD_REQUEST, RequestApprovalV1,
             "Ask for the approval of an operation just prepared, built from the ledger's record of it.")],
    "approval": [
        (subjects.APPROVAL_EVT_REQUESTED, ApprovalRequestedV1, "A pending approval was stored."),
        (subjects.APPROVAL_EVT_RESOLVED, ApprovalResolvedV1,
         "An approval left pending: decided, expired or superseded; carries the grant when approved."),
        (subjects.APPROVAL_EVT_EXPIRING, ApprovalExpiringV1,
         "A pending approval reached its warning time (warn_before its deadline) undecided; once per approval."),
        (subjects.APPROVAL_EVT_ESCALATED, ApprovalEscalatedV1,
         "A pending approval reached its policy's escalate_after undecided: escalate_to joined the roles that may "
         "decide it; once per approval, deadline unchanged (Nats-Msg-Id approval.escalated.<pending_id>.<random>)."),
        (subjects.APPROVAL_EVT_VOTED, ApprovalVotedV1,
         "A person voted on a quorum approval (approvals_required > 1), before the resolution it may cause."),
        (subjects.APPROVAL_EVT_REQUEST_REFUSED, ApprovalRequestRefusedV1,
         "The policy in force refused the ledger's request: nothing is pending, the call will not be executed."),
        (subjects.ERP_CMD_COMMIT, CommitOperationV1,
         "An approving decision's commit, with the signed grant, in the decision's transaction "
         "(Nats-Msg-Id erp.commit.<operation_id>.<random>)."),
    ],
    "agent": [(subjects.SESSION_EVENTS_ALL, SessionEventV1,
               "The session's UI events (SPEC §4), live on core NATS after the commit that stored them in the "
               "agent's database (gap-free seq per session); the gateway's SSE replays from that store "
               "(query.agent.events)."),
              (subjects.AGENT_EVT_RUN_CANCELLED, RunCancelledV1,
               "The owner cancelled a waiting run (in the cancel's transaction); the approval service withdraws.")],
}


def specification() -> Specification:
    """Compose every NATS service (without connecting) and describe their endpoints."""
    apps = services()
    for app in apps:
        for subject, model, description in PUBLISHED[app.name]:
            # The approval service also consumes its own events (webhooks): its subscriber has the plain title.
            title = f"{app.name}:{subject}" + (":published" if subject in _consumed(app) else "")
            app.broker.publisher(subject, schema=model, title=title, description=description)
    return AsyncAPI(*(app.broker for app in apps), title="Erpilot", version="1",
                    description="Commands, queries and events between the Erpilot services (contracts v1).",
                    ).to_specification()


def services() -> list[Any]:
    """The ERP, approval and agent services composed with their real endpoints, nothing connected."""
    from erpilot_agent.app import build as build_agent
    from erpilot_agent.settings import AgentSettings
    from erpilot_approval.app import build as build_approval
    from erpilot_approval.settings import ApprovalSettings
    from erpilot_erp.app import build as build_erp
    from erpilot_erp.settings import ErpSettings

    with tempfile.TemporaryDirectory() as data_dir:  # the dev grant keys build() may create
        common: dict[str, Any] = dict(nats_url=SERVER, database_url="postgresql://erpilot@/erpilot",
                                      data_dir=Path(data_dir), dev_mode=True)
        return [build_erp(ErpSettings(**common)), build_approval(ApprovalSettings(**common, policy=None)),
                build_agent(AgentSettings(**common, model="rules"))]


def _consumed(app: Any) -> set[str]:
    return {sub._resolved_subject_string for sub in app.broker.subscribers}


def document() -> dict[str, Any]:
    """The AsyncAPI document as JSON data."""
    return specification().to_jsonable()


def render() -> str:
    """The document as committed: sorted keys, so regenerating it only changes what changed."""
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
