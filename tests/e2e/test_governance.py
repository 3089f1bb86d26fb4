"""Governance through HTTP on the whole stack: a bulk decision approves several writes at once and each
commits; the audit log tells each one's story to an admin, verifies, and its rows cannot be changed by the
approval service's own database role."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import asyncpg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.e2e.conftest import Api, wait_for
from tests.e2e.test_trust_boundaries import process_env
from tests.e2e.test_write_flow import draft, finished, request_write

pytestmark = pytest.mark.e2e


def verify_key_b64(stack) -> str:
    private = Ed25519PrivateKey.from_private_bytes(
        base64.b64decode(process_env(stack, "approval")["ERPILOT_GRANT_SIGNING_KEY"]))
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def erpilot(stack, *args: str) -> subprocess.CompletedProcess:
    # As operations run it: through the approval service (query.approval.audit_chain), no database URL.
    env = {**{k: v for k, v in os.environ.items() if k != "ERPILOT_DATABASE_URL"}, "ERPILOT_NATS_URL": stack.nats_url,
           "ERPILOT_GRANT_VERIFY_KEY": verify_key_b64(stack)}
    return subprocess.run([sys.executable, "-m", "erpilot", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_bulk_approval_commits_each_write_and_the_audit_log_tells_it(requester: Api, approver: Api, admin: Api,
                                                                      stack) -> None:
    session_id = requester.new_session()
    pendings = [request_write(requester, session_id, "submit_order",
                              {"draft_id": d["draft_id"], "revision": d["revision"]})
                for d in (draft(requester, session_id, [(sku, 1)]) for sku in ("SKU-PAPER-A4", "SKU-PEN-BLUE"))]
    # (two SKUs: under the default exact stock check, the first commit would make the second's stock stale)

    stale = approver.post("/v1/approvals/decisions", {"action": "approve", "items": [
        {"pending_id": pendings[0]["pending_id"], "fingerprint": pendings[0]["fingerprint"]},
        {"pending_id": pendings[1]["pending_id"], "fingerprint": "sha256:" + "0" * 64}]})
    assert stale.status_code == 409, stale.text
    assert (stale.json()["code"], stale.json()["pending_id"], stale.json()["index"]) == (
        "stale_fingerprint", pendings[1]["pending_id"], 1)
    assert approver.get(f"/v1/approvals/{pendings[0]['pending_id']}").json()["status"] == "pending"

    answer = approver.post("/v1/approvals/decisions", {"action": "approve", "comment": "batch", "items": [
        {"pending_id": p["pending_id"], "fingerprint": p["fingerprint"]} for p in pendings]})
    assert answer.status_code == 200, answer.text
    assert [i["status"] for i in answer.json()["items"]] == ["approved", "approved"]
    for pending in pendings:
        assert finished(requester, session_id, pending["call_id"])["outcome"] == "succeeded"

    operation_id = answer.json()["items"][0]["operation_id"]

    def story():
        rows = admin.get("/v1/audit", operation_id=operation_id).json()["items"]
        return rows if "grant_consumed" in [r["kind"] for r in rows] else None

    rows = wait_for(story, timeout=30)
    assert [r["kind"] for r in rows] == ["request", "vote", "decision", "grant_issued", "commit_outcome",
                                         "grant_consumed"]
    assert rows[1]["actor"] == approver.sub and rows[1]["data"]["comment"] == "batch"
    assert rows[4]["data"]["status"] == "committed"
    assert all(r["hash"] and r["prev_hash"] and r["signature"] for r in rows)
    assert approver.get("/v1/audit", operation_id=operation_id).status_code == 403
    assert admin.get("/v1/audit").status_code == 422

    verified = erpilot(stack, "audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "audit log intact" in verified.stdout
    exported = erpilot(stack, "audit", "export", "--since", "2000-01-01T00:00:00Z")
    assert exported.returncode == 0 and operation_id in exported.stdout


@pytest.mark.parametrize("statement", [
    "UPDATE approval.audit_log SET actor = 'mallory'",
    "DELETE FROM approval.audit_log",
    "TRUNCATE approval.audit_log",
    "UPDATE approval.audit_checkpoints SET hash = 'x'",
    "DELETE FROM approval.audit_checkpoints",
])
async def test_the_approval_role_cannot_change_or_remove_audit_rows(stack, statement) -> None:
    conn = await asyncpg.connect(process_env(stack, "approval")["ERPILOT_DATABASE_URL"])
    try:
        assert await conn.fetchval("SELECT count(*) FROM approval.audit_log") >= 0  # it reads them
        probe = conn.transaction()  # it appends (rolled back: the probe is not a valid link)
        await probe.start()
        await conn.execute("INSERT INTO approval.audit_log VALUES (0, now(), 'probe', null, null, null, '{}', "
                           "'', '', '')")
        await probe.rollback()
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement)
    finally:
        await conn.close()
