"""Every event subject declared once with the model it carries, as ``requests`` declares the request/reply ones.

An ``Event`` is what a consumer registers (``ServiceBus.register``): the subject of ``erpilot_contracts.subjects``
and the model its messages parse as, so no consumer names a model of its own for a subject.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import RunCancelledV1
from erpilot_contracts.approval.v1 import (
    ApprovalEscalatedV1,
    ApprovalExpiringV1,
    ApprovalRequestedV1,
    ApprovalRequestRefusedV1,
    ApprovalResolvedV1,
    ApprovalVotedV1,
)
from erpilot_contracts.base import Message
from erpilot_contracts.erp.v1 import OperationStatusV1

E = TypeVar("E", bound=Message)


@dataclass(frozen=True)
class Event(Generic[E]):
    subject: str
    model: type[E]

    def __post_init__(self) -> None:
        if ".evt." not in self.subject:
            raise ValueError(f"{self.subject} is not an event subject")


ERP_OPERATION_FINISHED = Event(subjects.ERP_EVT_OPERATION_FINISHED, OperationStatusV1)
APPROVAL_REQUESTED = Event(subjects.APPROVAL_EVT_REQUESTED, ApprovalRequestedV1)
APPROVAL_RESOLVED = Event(subjects.APPROVAL_EVT_RESOLVED, ApprovalResolvedV1)
APPROVAL_EXPIRING = Event(subjects.APPROVAL_EVT_EXPIRING, ApprovalExpiringV1)
APPROVAL_VOTED = Event(subjects.APPROVAL_EVT_VOTED, ApprovalVotedV1)
APPROVAL_ESCALATED = Event(subjects.APPROVAL_EVT_ESCALATED, ApprovalEscalatedV1)
APPROVAL_REQUEST_REFUSED = Event(subjects.APPROVAL_EVT_REQUEST_REFUSED, ApprovalRequestRefusedV1)
AGENT_RUN_CANCELLED = Event(subjects.AGENT_EVT_RUN_CANCELLED, RunCancelledV1)

ALL: tuple[Event[Any], ...] = tuple(value for value in dict(globals()).values() if isinstance(value, Event))
