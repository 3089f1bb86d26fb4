"""Email decision links (SPEC §11 "Approval channels", issue 34): the query a link's page asks and the decision
its confirmation sends (schema_version 1).

The gateway carries the link's token from the person's browser as it came; only the approval service, which
signed it when it sent the mail, can read it: the token names the person, the action and the fingerprint.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from erpilot_contracts.base import Message
from erpilot_contracts.erp.preview import PreviewV1


class EmailLinkV1(Message):
    """What an opened link stands for (``query.approval.email_link``), without deciding anything."""

    pending_id: str
    token: str = Field(max_length=2000)


class DecideByLinkV1(Message):
    """The confirmation of an opened link (``cmd.approval.decide_by_link``): decide as the person the token names,
    with the token's action and fingerprint, through the same decision as ``req.approval.decide``."""

    pending_id: str
    token: str = Field(max_length=2000)


class EmailLinkViewV1(Message):
    """The link's approval as the confirmation page shows it: the ledger's preview, and the agent's reason apart."""

    pending_id: str
    action: Literal["approve", "reject"]
    sub: str = Field(description="The person the link decides as.")
    tool: str
    preview: PreviewV1
    agent_reason: str | None = Field(None, description="The agent's words (its claim): shown as 'the agent says'.")
    expires_at: datetime
