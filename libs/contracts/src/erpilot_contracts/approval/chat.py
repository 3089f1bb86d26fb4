"""The chat card's button callbacks (SPEC §11 "Approval channels", issue 34), schema_version 1.

The gateway passes a callback on exactly as the chat platform sent it: the approval service, the one process that
holds ERPILOT_CHAT_SIGNING_SECRET, checks Slack's ``v0`` signature over these bytes and reads who pressed what.
"""

from __future__ import annotations

from pydantic import Field

from erpilot_contracts.base import Message


class ChatActionV1(Message):
    """One callback (``cmd.approval.chat_action``): the raw form body and Slack's two signature headers."""

    body: str = Field(max_length=65536, description="The request body as received (payload=<urlencoded JSON>).")
    timestamp: str = Field(max_length=20, description="X-Slack-Request-Timestamp.")
    signature: str = Field(max_length=100, description="X-Slack-Signature (v0=<hex>).")
