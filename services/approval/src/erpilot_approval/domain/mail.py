"""The approval email (no I/O): the ledger's preview as text and HTML, the agent's reason apart from it, and the
two decision links.

Everything but the reason comes from the ledger's signed request and this service's record; the reason is the
agent's claim and is labelled as such ("the agent says"), never merged into the preview.
"""

from __future__ import annotations

import html
import json
from email.message import EmailMessage

from erpilot_approval.domain import notices
from erpilot_approval.domain.approvals import PendingApproval

_NOTE = ("Each link opens a confirmation page: nothing is decided until you confirm there. The links are yours "
         "alone, work once, and stop working at the deadline.")


def decision_url(public_url: str, pending_id: str, token: str) -> str:
    return f"{public_url.rstrip('/')}/v1/approvals/{pending_id}/email-decision?token={token}"


def approval_email(approval: PendingApproval, *, to: str, sender: str, approve_url: str,
                   reject_url: str) -> EmailMessage:
    """One person's mail about ``approval``, with their own approve and reject links."""
    what = " ".join(html.unescape(notices.subject(approval.tool, approval.arguments, approval.preview)).split())
    deadline = approval.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    preview = json.dumps(approval.preview, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    message = EmailMessage()
    message["Subject"] = f"Approval needed: {what}"
    message["From"] = sender
    message["To"] = to
    reason = ""
    if approval.agent_reason:
        reason = f"\nThe agent says (its own words, not checked by the ledger):\n  {approval.agent_reason}\n"
    message.set_content(
        f"{what} ({approval.tool}) awaits your decision until {deadline}.\n\n"
        f"The ledger's preview:\n{preview}\n{reason}\n"
        f"Approve: {approve_url}\nReject: {reject_url}\n\n{_NOTE}\n")
    reason_html = ""
    if approval.agent_reason:
        reason_html = (f'<h3>The agent says</h3><p class="agent-reason"><em>{html.escape(approval.agent_reason)}'
                       "</em><br><small>The agent's own words, not checked by the ledger.</small></p>")
    message.add_alternative(
        f"<html><body><p><strong>{html.escape(what)}</strong> ({html.escape(approval.tool)}) awaits your decision "
        f"until {deadline}.</p><h3>The ledger's preview</h3><pre>{html.escape(preview)}</pre>{reason_html}"
        f'<p><a href="{html.escape(approve_url)}">Approve</a> &nbsp; <a href="{html.escape(reject_url)}">Reject</a>'
        f"</p><p><small>{_NOTE}</small></p></body></html>", subtype="html")
    return message
