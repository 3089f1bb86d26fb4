"""The standing approvals page lists the standing approvals in force a person gave, each with a Revoke button that
ends it through ``DELETE /v1/standing-approvals/{id}`` (issue 34)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.harness import now, tok

pytestmark = pytest.mark.browser


def standing(standing_id: str, given_by: str, **changes) -> dict:
    return {"schema_version": 1, "standing_id": standing_id, "given_by": given_by, "session_id": "ses_standing",
            "tool": "submit_order", "max_amount_minor": 5000, "until": (now() + timedelta(days=2)).isoformat(),
            "roles": ["approver"], "created_at": now().isoformat(), "revoked_at": None, **changes}


def test_a_giver_sees_their_standing_approvals_and_revokes_one(console, open_page, artifacts):
    console.fake.standing["sa_page_1"] = standing("sa_page_1", "apr-standing")
    console.fake.standing["sa_page_other"] = standing("sa_page_other", "someone-else")
    page = open_page(console, tok("apr-standing", "approver"))

    page.goto("/")
    page.click("#tab-standing")  # the console's tab leads there

    rows = page.locator("#standing tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("submit_order")
    expect(rows.first).to_contain_text("5000 minor units")
    page.screenshot(path=str(artifacts / "standing-approvals.png"), full_page=True)

    rows.first.locator("button.revoke").click()

    expect(page.locator("#standing-empty")).to_be_visible()
    assert console.fake.standing["sa_page_1"]["revoked_at"] is not None
    assert console.fake.standing["sa_page_other"]["revoked_at"] is None
