"""The chat card's buttons (``cmd.approval.chat_action``): check Slack's signature and replay window, map the chat
user to a person by ``[people.<sub>] chat_id``, decide through ``decisions.decide`` like any decision, and queue
the card's update (to Slack's ``response_url``, else the chat webhook) on the webhook deliveries.

The signing secret lives here only; the gateway hands on the bytes it received.
"""

from __future__ import annotations

import json
from datetime import datetime

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.chat import ChatError, outcome_card, parse_action, verify_signature
from erpilot_approval.domain.votes import vote_of
from erpilot_approval.domain.webhooks import event_id
from erpilot_approval.service_layer import decisions
from erpilot_approval.service_layer.ports import Ports
from erpilot_contracts.approval.chat import ChatActionV1
from erpilot_contracts.approval.v1 import Actor, ApprovalRecordV1, DecideV1
from erpilot_platform.refusals import Refused

UPDATE_EVENT = "chat.update"  # a card's new face after a button decided (delivered unsigned, like the card)


def _refused(error: ChatError) -> Refused:
    return Refused(error.code, error.message, error.status)


async def chat_action(cmd: ChatActionV1, ports: Ports) -> ApprovalRecordV1:
    """A chat card's button as the platform sent it: Slack's v0 signature and replay window checked here, the chat user
    mapped to a person, decided like req.approval.decide.

    Decide as the person whose chat user pressed the button; a forged, stale or repeated press decides nothing."""
    secret = ports.chat_secret
    if secret is None:
        raise Refused("chat_not_configured", "no ERPILOT_CHAT_SIGNING_SECRET is configured", 404)
    now = await ports.unit.read(lambda unit: unit.now())
    try:
        verify_signature(secret, cmd.timestamp, cmd.body.encode(), cmd.signature, now)
        pressed = parse_action(cmd.body.encode())
    except ChatError as error:
        raise _refused(error) from None
    sub = next((sub for sub, contact in ports.policy.contacts.items() if contact.chat_id == pressed.user_id), None)
    if sub is None:
        raise Refused("unknown_chat_user", "this chat user is no person of the policy's [people] table", 403)
    directory = ports.people()
    roles = list(directory.get(sub, ())) if directory is not None else []

    def once(approval: PendingApproval, _: datetime) -> None:
        if vote_of(approval.votes, sub) is not None:  # a replay inside the window, or a second press
            raise Refused("already_voted", f"{sub} already decided this approval", 409)

    record = await decisions.decide(
        DecideV1(pending_id=pressed.pending_id, action=pressed.action, fingerprint=pressed.fingerprint,
                 comment=None, actor=Actor(sub=sub, roles=roles)), ports, check=once)
    url = pressed.response_url or ports.policy.chat_url
    if url:
        approval = await ports.unit.read(lambda unit: unit.approvals.get(pressed.pending_id))
        body = json.dumps(outcome_card(approval, record.status, sub), separators=(",", ":"))
        if await ports.unit.run(lambda unit: unit.webhooks.add(
                event_id=event_id(UPDATE_EVENT, f"{pressed.pending_id}\n{sub}"), event_type=UPDATE_EVENT,
                pending_id=pressed.pending_id, body=body, urls=[url])):
            ports.wake_webhooks()
    return record
