"""The invariant checks of `erpilot torture` catch what they claim to: each broken case is built by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from erpilot.torture_checks import Expected, Findings, check_ledger, lifecycle_problems

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
