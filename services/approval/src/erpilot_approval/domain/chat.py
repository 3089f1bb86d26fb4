"""The chat card (SPEC §11 "Approval channels"; no I/O): ``[channels.chat] url``, the Slack-compatible block
message a new approval posts there, Slack's ``v0`` request signatures on its button callbacks, and the card a
decision replaces it with.

The card's facts come from the ledger's preview and this service's record; the agent's reason is shown apart,
labelled "the agent says". A button names the approval and the fingerprint the card showed; who pressed it is the
chat user Slack signed for, mapped to a person by ``[people.<sub>] chat_id``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from erpilot_approval.domain import notices
from erpilot_approval.domain.policy_values import PolicyError

if TYPE_CHECKING:  # the policy reads [channels] from here, and approvals import the policy
    from erpilot_approval.domain.approvals import PendingApproval

REPLAY_WINDOW_SECONDS = 300  # Slack's advice: refuse a request whose timestamp is more than five minutes off
ACTIONS = ("approve", "reject")


class ChatError(Exception):
    def __init__(self, code: str, status: int, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


@dataclass(frozen=True)
class ChatAction:
    user_id: str
    action: str
    pending_id: str
    fingerprint: str
    response_url: str | None


def parse_chat_url(channels: Any) -> str | None:
    """``[channels.chat] url`` (an http(s) URL) or None."""
    if not isinstance(channels, dict) or set(channels) - {"chat"}:
        raise PolicyError("channels: expected only a [channels.chat] table")
    chat = channels.get("chat")
    if chat is None:
        return None
    if not isinstance(chat, dict) or set(chat) != {"url"}:
        raise PolicyError("channels.chat: expected exactly the key url")
    parts = urlsplit(chat["url"]) if isinstance(chat["url"], str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise PolicyError("channels.chat.url: expected an http(s) URL")  # not echoed: the URL is a credential
    return chat["url"]


def verify_signature(secret: bytes, timestamp: str, body: bytes, signature: str, now: datetime) -> None:
    """Slack's scheme: ``v0=`` + hex HMAC-SHA256(secret, ``v0:<timestamp>:<body>``), the timestamp within five
    minutes of ``now``; else ``invalid_signature`` or ``stale_request`` (401)."""
    if not timestamp.isdigit() or abs(now.timestamp() - int(timestamp)) > REPLAY_WINDOW_SECONDS:
        raise ChatError("stale_request", 401, "the request's timestamp is outside the five-minute window")
    expected = "v0=" + hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise ChatError("invalid_signature", 401, "the request's signature does not match")


def parse_action(body: bytes) -> ChatAction:
    """The button pressed, from Slack's ``payload=<urlencoded JSON>`` form body (a signed one)."""
    bad = ChatError("invalid_payload", 400, "expected a block_actions payload with one approve or reject button")
    try:
        payload = json.loads(parse_qs(body.decode(), strict_parsing=True)["payload"][0])
        [button] = payload["actions"]
        pending_id, fingerprint = button["value"].split("|")
        user_id, action = payload["user"]["id"], button["action_id"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise bad from None
    if action not in ACTIONS or not isinstance(user_id, str):
        raise bad
    response_url = payload.get("response_url")
    return ChatAction(user_id=user_id, action=action, pending_id=pending_id, fingerprint=fingerprint,
                      response_url=response_url if isinstance(response_url, str) else None)


def _preview_lines(approval: PendingApproval) -> str:
    return "\n".join(f"*{notices.escape(k)}*: {notices.escape(v)}" for k, v in sorted(approval.preview.items()))


def card(approval: PendingApproval, approval_url: str) -> dict[str, Any]:
    """The message a new approval posts: preview, amount, deadline, Approve / Reject / Open."""
    what = notices.subject(approval.tool, approval.arguments, approval.preview)
    amount = notices.money(approval.preview.get("amount_minor"), approval.preview.get("currency"))
    deadline = approval.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    value = f"{approval.pending_id}|{approval.fingerprint}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"Approval needed: {approval.tool}"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{what}*\n{_preview_lines(approval)}"},
         "fields": [{"type": "mrkdwn", "text": f"*Amount*\n{amount or '—'}"},
                    {"type": "mrkdwn", "text": f"*Deadline*\n{deadline}"}]},
    ]
    if approval.agent_reason:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"_The agent says (its claim, checked by no one):_ "
                                       f"{notices.escape(approval.agent_reason)}"}]})
    blocks.append({"type": "actions", "block_id": f"decide:{approval.pending_id}", "elements": [
        {"type": "button", "action_id": "approve", "style": "primary", "value": value,
         "text": {"type": "plain_text", "text": "Approve"}},
        {"type": "button", "action_id": "reject", "style": "danger", "value": value,
         "text": {"type": "plain_text", "text": "Reject"}},
        {"type": "button", "action_id": "open", "url": approval_url, "text": {"type": "plain_text", "text": "Open"}},
    ]})
    return {"text": f"{what} awaits a decision", "blocks": blocks}


def outcome_card(approval: PendingApproval, status: str, by: str) -> dict[str, Any]:
    """What replaces the card once a button decided (``status`` of the approval now, ``by`` the person)."""
    what = notices.subject(approval.tool, approval.arguments, approval.preview)
    text = f"{what}: {status} (vote by {notices.escape(by)})"
    return {"replace_original": True, "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
