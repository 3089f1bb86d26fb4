"""Chat channel callbacks (SPEC §11 "Approval channels"): ``POST /v1/channels/chat/actions`` takes a chat card's
button press as the platform sent it (Slack: a ``payload=<urlencoded JSON>`` form body, ``X-Slack-Signature``,
``X-Slack-Request-Timestamp``) and hands it on unread: the approval service holds ERPILOT_CHAT_SIGNING_SECRET and
checks the signature, the replay window and who pressed what. No bearer token: the signature is the credential.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from erpilot_contracts import requests
from erpilot_contracts.approval.chat import ChatActionV1
from erpilot_gateway.answers import ChatActionAnswer
from erpilot_gateway.problems import Problem

router = APIRouter(prefix="/v1/channels", tags=["channels"])


@router.post("/chat/actions")
async def chat_action(request: Request) -> ChatActionAnswer:
    """A chat card's Approve or Reject, signed by the chat platform; answers the card's new text."""
    try:
        body = (await request.body()).decode("ascii")  # a form body is urlencoded ASCII
        action = ChatActionV1(body=body, timestamp=request.headers.get("x-slack-request-timestamp", ""),
                              signature=request.headers.get("x-slack-signature", ""))
    except ValueError:  # not ASCII, or longer than any callback: no request of the platform's
        raise Problem(400, "invalid_payload", "expected a signed form body of at most 64 KiB") from None
    record = await request.app.state.services.call(requests.APPROVAL_CHAT_ACTION, action)
    return ChatActionAnswer(text=f"{record.tool}: {record.status}", pending_id=record.pending_id, status=record.status)
