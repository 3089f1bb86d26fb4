"""The checks of `erpilot torture` catch what they claim to: each broken case is built by hand and fed to its check
(the run itself, the call views, the session stream, the ledger, the approvals and grants, the audit verdict)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from erpilot.cli import build_parser
from erpilot.torture.approval_checks import ApprovalRecords, approval_problems, check_audit
from erpilot.torture.campaign import Campaign, Row, summary
from erpilot.torture.checks import (
    Expected,
    Findings,
    check_call,
    check_ledger,
    check_messages,
    check_session,
    lifecycle_problems,
    run_findings,
)
from erpilot.torture.targets import Target
from erpilot.torture.workload import Call

pytestmark = pytest.mark.unit


def started() -> tuple[str, dict]:
    return ("tool_started", {"call_id": "c"})


def pending(pid: str) -> tuple[str, dict]:
    return ("approval_pending", {"pending_id": pid})


def resolved(pid: str, status: str) -> tuple[str, dict]:
    return ("approval_resolved", {"pending_id": pid, "status": status})


def finished(outcome: str) -> tuple[str, dict]:
    return ("tool_finished", {"outcome": outcome})


def test_well_formed_lifecycles_pass():
    approved = [started(), pending("p1"), resolved("p1", "approved"), ("tool_executing", {}), finished("succeeded")]
    edited = [started(), pending("p1"), resolved("p1", "superseded"), pending("p2"), resolved("p2", "rejected"),
              finished("not_executed")]
    draft = [started(), finished("succeeded")]
    for events in (approved, edited, draft):
        assert lifecycle_problems("c", events) == ([], [])


def test_a_second_finish_is_doubled():
    doubled, malformed = lifecycle_problems("c", [started(), finished("succeeded"), finished("succeeded")])
    assert doubled == ["c: 2 × tool_finished"] and malformed == []


@pytest.mark.parametrize("events, fragment", [
    ([pending("p1"), resolved("p1", "approved"), finished("succeeded")], "does not begin with tool_started"),
    ([started(), pending("p1")], "does not end with tool_finished"),
    ([started(), pending("p1"), pending("p2"), resolved("p2", "approved"), finished("succeeded")],
     "a second approval_pending"),
    ([started(), pending("p1"), resolved("p9", "approved"), finished("succeeded")], "awaited p1"),
    ([started(), pending("p1"), resolved("p1", "rejected"), ("tool_executing", {}), finished("not_executed")],
     "tool_executing without an approval"),
    ([started(), pending("p1"), resolved("p1", "expired"), finished("succeeded")], "succeeded after an approval"),
])
def test_malformed_lifecycles_are_named(events, fragment):
    _, malformed = lifecycle_problems("c", events)
    assert any(fragment in m for m in malformed), malformed


def test_expected_ledger_follows_committed_effects():
    expected = Expected(stock={"A": 10, "B": 5})
    expected.apply("submit_order", {}, {"order_id": "O-1", "paid_minor": 900,
                                        "lines": [{"sku": "A", "qty": 3}, {"sku": "B", "qty": 1}]})
    expected.apply("submit_order", {}, {"order_id": "O-2", "paid_minor": 100, "lines": [{"sku": "A", "qty": 1}]})
    expected.apply("adjust_stock", {"sku": "B", "delta": 7}, {})
    expected.apply("refund_payment", {"order_id": "O-1", "amount_minor": 250}, {})
    expected.apply("refund_payment", {"order_id": "O-2", "amount_minor": 100}, {})
    assert expected.refundable() == {"O-1": 650}  # O-2 is refunded in full
    expected.apply("cancel_order", {}, {"order_id": "O-1", "lines": [{"sku": "A", "qty": 3}]})
    assert expected.stock == {"A": 9, "B": 11}
    assert expected.orders == 2 and expected.refunded == {"O-1": 250, "O-2": 100} and expected.cancelled == {"O-1"}
    assert expected.refundable() == {}  # O-1 is cancelled


class FakeLedger:
    """Answers check_ledger's three queries with given rows (the ERP tables as they are)."""

    def __init__(self, products, orders, refunds, committed_refunds):
        self.answers = [products, orders, [(refunds,)], [(committed_refunds,)]]

    async def scalars(self, sql: str, **params):
        return self.answers.pop(0)


def order(order_id, draft="D-1", revision=1, refunded=0, status="placed"):
    return SimpleNamespace(order_id=order_id, draft_id=draft, revision=revision, refunded_minor=refunded, status=status)


async def test_the_ledger_check_passes_when_everything_matches():
    expected = Expected(stock={"A": 7}, refunded={"O-1": 100}, orders=1)
    findings = Findings()
    await check_ledger(FakeLedger([("A", 7)], [order("O-1", refunded=100)], 1, 1), expected, ["s"], findings)
    assert findings.ok, findings.all()


async def test_a_doubled_order_shows_in_stock_count_and_revision():
    expected = Expected(stock={"A": 7}, refunded={"O-1": 0}, orders=1)
    findings = Findings()
    ledger = FakeLedger([("A", 4)], [order("O-1"), order("O-2")], 0, 0)
    await check_ledger(ledger, expected, ["s"], findings)
    assert len(findings.doubled) == 3 and not findings.lost, findings.all()


async def test_a_lost_effect_and_a_doubled_refund_are_told_apart():
    expected = Expected(stock={"A": 7}, refunded={"O-1": 100}, orders=1)
    findings = Findings()
    await check_ledger(FakeLedger([("A", 9)], [order("O-1", refunded=200)], 2, 1), expected, ["s"], findings)
    assert findings.lost == ["stock A: 9 on hand, committed effects say 7"]
    assert any("refunded 200" in m for m in findings.doubled) and any("2 refund rows" in m for m in findings.doubled)


async def test_a_cancel_the_commits_do_not_explain_is_a_violation():
    expected = Expected(stock={"A": 7}, refunded={"O-1": 0}, orders=1)
    findings = Findings()
    await check_ledger(FakeLedger([("A", 7)], [order("O-1", status="cancelled")], 0, 0), expected, ["s"], findings)
    assert findings.violations == ["order O-1: status cancelled disagrees with the commits"]


# --- the run itself: its failpoint was reached, nothing else died, everything settled -----------------------
TARGET = Target("erp.commit.after_db_commit", "erp")


def test_a_run_that_crashed_at_its_failpoint_and_settled_passes():
    assert run_findings(TARGET, [137], [], {}, 90).ok


def test_an_unreached_failpoint_fails_the_run_and_the_campaign():
    findings = run_findings(TARGET, [], [], {}, 90)
    assert not findings.ok
    assert findings.unreached == ["erp.commit.after_db_commit was never reached in erp: the run crashed nothing, "
                                  "so it proves nothing (does the workload pass that point?)"]
    campaign = Campaign(ts=None)  # what the campaign makes of such a run: its first failure, so exit 1
    campaign.record(TARGET, 7, Row(runs=1, failed=int(not findings.ok)), findings.all())
    assert campaign.first_failure == ("erp.commit.after_db_commit", 7, findings.all())
    assert "replay: erpilot torture --failpoint erp.commit.after_db_commit --seed 7 --runs 1" in summary(campaign, 1)


@pytest.mark.parametrize("crashes, others, backlog, fragment", [
    ([1], [], {}, "exited 1, not 137"),
    ([137], ["approval exited with code -11"], {}, "another process exited"),
    ([137], [], {"erp.outbox": 2}, "not quiet after 90s"),
])
def test_a_wrong_crash_another_death_or_a_backlog_fails_the_run(crashes, others, backlog, fragment):
    findings = run_findings(TARGET, crashes, others, backlog, 90)
    assert any(fragment in v for v in findings.violations), findings.all()


@pytest.mark.parametrize("runs", ["0", "-3"])
def test_a_campaign_without_runs_is_refused_with_exit_2(runs, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["torture", "--runs", runs])
    assert exited.value.code == 2
    assert "--runs: must be at least 1" in capsys.readouterr().err


# --- what the stream and the views say ---------------------------------------------------------------------
def test_an_event_stored_twice_and_a_dead_letter_are_found():
    findings = Findings()
    check_messages({"ERPILOT_EVENTS": [("evt.a", b"1", {}), ("evt.a", b"1", {}), ("evt.a", b"2", {})]}, findings)
    assert findings.doubled == ["ERPILOT_EVENTS: a message on evt.a stored 2 times"] and not findings.violations
    check_messages({"ERPILOT_DEAD_LETTERS": [("dlq.erp.x", b"", {"Erpilot-Original-Subject": "cmd.erp.commit",
                                                                   "Erpilot-Reason": "invalid message"})]}, findings)
    assert findings.violations == ["dead-lettered from cmd.erp.commit: invalid message"]


class FakeStream:
    def __init__(self, events):
        self.events = events

    async def session_events(self, session_id):
        return self.events


def event(seq, type_="tool_started", call_id="c"):
    return {"seq": seq, "type": type_, "data": {"call_id": call_id}}


async def test_a_gap_in_a_sessions_seq_is_found():
    findings = Findings()
    await check_session(FakeStream([event(1), event(2, "tool_finished")]), "s", findings)
    assert findings.ok, findings.all()
    await check_session(FakeStream([event(1), event(3, "tool_finished")]), "s", findings)
    assert findings.violations == ["session s: seq is not gap-free from 1: [1, 3]"]


class FakeDriver:
    """Answers check_call's requests: the call's view, its approvals' records, its operation."""

    def __init__(self, view, approvals=(), operation=None):
        self._view, self.approvals, self.operation = view, dict(approvals), operation

    async def view(self, call):
        return self._view

    async def send(self, who, method, path, body=None):
        if path.startswith("/v1/approvals/"):
            return SimpleNamespace(status_code=200, json=lambda: {"status": self.approvals[path.rsplit("/", 1)[1]]})
        return SimpleNamespace(status_code=200, json=lambda: self.operation or {})


def write(pending_ids=("p1",), approved_by_api=False) -> Call:
    return Call("s", "c", "adjust_stock", pending_ids=list(pending_ids), approved_by_api=approved_by_api)


def finished_view(outcome, result=None):
    return {"status": "finished", "outcome": outcome, "operation_id": "op1",
            "arguments": {"sku": "A", "delta": 2}, "result": result or {}}


async def test_an_approved_and_committed_call_passes_and_counts_its_effect():
    expected, findings = Expected(stock={"A": 1}), Findings()
    driver = FakeDriver(finished_view("succeeded"), {"p1": "approved"}, {"status": "committed"})
    await check_call(driver, write(approved_by_api=True), expected, findings)
    assert findings.ok and expected.stock == {"A": 3}, findings.all()


@pytest.mark.parametrize("call, driver, bucket, fragment", [
    (write(), FakeDriver(None), "lost", "the API does not know the call"),
    (write(), FakeDriver({"status": "running"}), "lost", "still running after the run"),
    (write(pending_ids=()), FakeDriver(finished_view("succeeded")), "violations", "succeeded without any approval"),
    (write(), FakeDriver(finished_view("not_executed"), {"p1": "pending"}, {"status": "prepared"}), "lost",
     "(forgotten)"),
    (write(), FakeDriver(finished_view("not_executed"), {"p1": "approved"}, {"status": "prepared"}), "lost",
     "approved, yet operation prepared"),
    (write(approved_by_api=True), FakeDriver(finished_view("not_executed"), {"p1": "rejected"},
                                             {"status": "prepared"}), "lost", "the API answered approved"),
    (write(), FakeDriver(finished_view("not_executed"), {"p1": "rejected"}, {"status": "committed"}), "violations",
     "committed although the approval ended rejected"),
    (write(), FakeDriver(finished_view("succeeded"), {"p1": "expired"}, {"status": "prepared"}), "violations",
     "outcome succeeded after expired"),
])
async def test_each_broken_call_is_named(call, driver, bucket, fragment):
    findings = Findings()
    await check_call(driver, call, Expected(stock={"A": 1}), findings)
    assert any(fragment in m for m in getattr(findings, bucket)), findings.all()


# --- approvals, grants, audit -----------------------------------------------------------------------------
def records(**changes) -> ApprovalRecords:
    """A consistent state: p1 approved and committed, p2 rejected, p3 superseded by p4 (approved, refused at commit
    by the business rules), p5 expired, p6 pending."""
    state = dict(
        approvals={"p1": ("op1", "approved"), "p2": ("op2", "rejected"), "p3": ("op3", "superseded"),
                   "p4": ("op4", "approved"), "p5": ("op5", "expired"), "p6": ("op6", "pending")},
        resolutions=[("p1", "decision", "approved"), ("p2", "decision", "rejected"), ("p3", "edit", "superseded"),
                     ("p4", "decision", "approved"), ("p5", "expiry", "expired")],
        grants_issued=Counter({"p1": 1, "p4": 1}),
        operations={"op1": "committed", "op2": "prepared", "op3": "prepared", "op4": "rejected", "op5": "prepared",
                    "op6": "prepared"},
        consumed=[("p1", "op1"), ("p4", "op4")],
        consumed_audited=Counter({"op1": 1}))
    state.update(changes)
    return ApprovalRecords(**state)


def test_consistent_approvals_pass():
    findings = Findings()
    approval_problems(records(), findings)
    assert findings.ok, findings.all()


@pytest.mark.parametrize("changes, bucket, fragment", [
    ({"resolutions": [*records().resolutions, ("p1", "decision", "approved")]}, "doubled", "p1: 2 decisions"),
    ({"resolutions": [r for r in records().resolutions if r[0] != "p2"]}, "violations",
     "p2: ended rejected without a recorded decision"),
    ({"resolutions": [*records().resolutions, ("p6", "decision", "approved")]}, "violations", "p6: still pending"),
    ({"resolutions": [("p1", "decision", "rejected"), *records().resolutions[1:]]}, "violations",
     "p1: ended approved, its decision says rejected"),
    ({"grants_issued": Counter({"p1": 2, "p4": 1})}, "doubled", "p1 (approved): 2 grants issued"),
    ({"grants_issued": Counter({"p1": 1, "p4": 1, "p2": 1})}, "doubled", "p2 (rejected): 1 grants issued"),
    ({"grants_issued": Counter({"p4": 1})}, "violations", "p1 (approved): 0 grants issued"),
    ({"consumed": [("p1", "op1"), ("p4", "op4"), ("p2", "op2")]}, "violations",
     "grant p2 consumed for op2, but that approval is rejected"),
    ({"consumed": [("p1", "op1")]}, "violations", "1 grants consumed, 2 approved operations finished"),
    ({"consumed": [("p1", "op1"), ("p4", "op4"), ("p9", "op4")]}, "doubled", "operation op4: 2 grants consumed"),
    ({"operations": {**records().operations, "op5": "committed"}, "consumed_audited": Counter({"op1": 1, "op5": 1})},
     "violations", "operation op5: committed, its approval is expired"),
    ({"consumed_audited": Counter()}, "lost", "operation op1 (committed): 0 grant_consumed rows"),
    ({"consumed_audited": Counter({"op1": 2})}, "doubled", "operation op1 (committed): 2 grant_consumed rows"),
])
def test_each_broken_approval_state_is_found(changes, bucket, fragment):
    findings = Findings()
    approval_problems(records(**changes), findings)
    assert any(fragment in m for m in getattr(findings, bucket)), findings.all()


def test_a_broken_audit_chain_fails_the_run():
    findings = Findings()
    check_audit((True, "audit log intact: 12 rows checked"), findings)
    assert findings.ok
    check_audit((False, "audit log BROKEN at row 3: its hash does not match its content"), findings)
    assert findings.violations == ["erpilot audit verify: audit log BROKEN at row 3: its hash does not match its "
                                   "content"]
