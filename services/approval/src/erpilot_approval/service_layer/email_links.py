"""Email decision links: what an opened link stands for (``query.approval.email_link``) and its confirmation
(``cmd.approval.decide_by_link``), which decides through ``decisions.decide`` like any decision.

The person is the one this service signed the link for, with the roles the people directory gives them now
(``[people.<sub>] roles`` / ERPILOT_ROLE_SOURCE), so a link decides nothing its person could not decide in the
console: separation of duties, delegations and quorum are the decision's own checks.
"""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain.approvals import PendingApproval
from erpilot_approval.domain.links import Link, LinkError, link_key, link_state, verify
from erpilot_approval.service_layer import decisions
from erpilot_approval.service_layer.common import not_found
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.links import DecideByLinkV1, EmailLinkV1, EmailLinkViewV1
from erpilot_contracts.approval.v1 import Actor, ApprovalRecordV1, DecideV1
from erpilot_platform.refusals import Refused


def _refused(error: LinkError) -> Refused:
    return Refused(error.code, error.message, error.status)


def _link(ports: Ports, pending_id: str, token: str) -> Link:
    try:
        return verify(link_key(ports.signing_key), token, pending_id)
    except LinkError as error:
        raise _refused(error) from None


def _still_valid(link: Link):
    def check(approval: PendingApproval, now: datetime) -> None:
        try:
            link_state(link, approval, now)
        except LinkError as error:
            raise _refused(error) from None
    return check


async def email_link(query: EmailLinkV1, ports: Ports) -> EmailLinkViewV1:
    """What an approval email's signed link stands for (person, action, preview); decides nothing: mail scanners open
    links.

    The approval the link decides, as of now; a used, superseded, decided or expired link is refused."""
    link = _link(ports, query.pending_id, query.token)

    async def look(unit: Work) -> tuple[PendingApproval | None, datetime]:
        return await unit.approvals.get(query.pending_id), await unit.now()

    approval, now = await ports.unit.read(look)
    if approval is None:
        raise not_found(query.pending_id)
    _still_valid(link)(approval, now)
    return EmailLinkViewV1(pending_id=approval.pending_id, action=link.action, sub=link.sub, tool=approval.tool,
                           preview=approval.preview, agent_reason=approval.agent_reason,
                           expires_at=approval.expires_at)


async def decide_by_link(cmd: DecideByLinkV1, ports: Ports) -> ApprovalRecordV1:
    """An approval email's link, confirmed: decide as the person this service signed it for, once, through the same
    decision as req.approval.decide.

    Decide as the link's person with their current roles; the link's state is checked under the row lock."""
    link = _link(ports, cmd.pending_id, cmd.token)
    directory = ports.people()
    roles = list(directory.get(link.sub, ())) if directory is not None else []
    decision = DecideV1(pending_id=cmd.pending_id, action=link.action, fingerprint=link.fingerprint,
                        comment=None, actor=Actor(sub=link.sub, roles=roles))
    return await decisions.decide(decision, ports, check=_still_valid(link))
