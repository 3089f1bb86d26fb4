"""When a consumer gives a failing message up (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from erpilot_platform.retries import RetryPolicy, dead_letter_headers, message_age_seconds

pytestmark = pytest.mark.unit


def test_transient_failures_are_retried_until_the_last_attempt_or_the_age_limit():
    policy = RetryPolicy(max_attempts=4, max_age_seconds=60)
    assert [policy.give_up_transient(n, age_seconds=1) is None for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert "4 attempts" in policy.give_up_transient(4, 1)
    reason = policy.give_up_transient(2, age_seconds=61)
    assert reason is not None and "61s old" in reason and "ERPILOT_DELIVERY_MAX_AGE_SECONDS=60" in reason


def test_a_delivery_beyond_the_budget_is_not_run_and_jetstream_stops_a_little_later():
    policy = RetryPolicy(max_attempts=4)
    assert policy.over_budget(4) is None
    assert "delivered 5 times" in policy.over_budget(5)
    assert policy.max_deliver == 7


def test_bugs_get_fewer_attempts_never_more_than_the_budget():
    assert RetryPolicy(max_attempts=30).give_up_bug(4) is None
    assert RetryPolicy(max_attempts=30).give_up_bug(5) == "failed 5 times"
    assert RetryPolicy(max_attempts=2).give_up_bug(2) == "failed 2 times"


def test_delays_grow_and_are_capped():
    policy = RetryPolicy()
    delays = [policy.transient_delay(n) for n in range(1, 40)]
    assert delays == sorted(delays) and delays[0] == 0.25 and max(delays) == 10.0


def test_a_message_caught_in_a_ten_second_failover_is_retried_soon_after_it():
    policy = RetryPolicy()
    retried_at, attempt = 0.0, 1
    while retried_at < 10.0:  # a NATS stream leader is re-elected 4-9 s after its node died
        retried_at += policy.transient_delay(attempt)
        attempt += 1
    assert retried_at <= 13.0


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"max_age_seconds": 0}, {"max_attempts_for_bugs": 0}])
def test_a_policy_that_could_never_run_is_refused(bad):
    with pytest.raises(ValueError):
        RetryPolicy(**bad)


def test_a_dead_letter_records_its_origin_and_drops_what_a_replay_must_not_repeat():
    raw = SimpleNamespace(
        subject="erpilot.v1.cmd.agent.tool_call",
        headers={"reply_to": "_INBOX.gateway.x", "traceparent": "00-abc", "Nats-Msg-Id": "evt_1",
                 "Erpilot-Reason": "old"},
        metadata=SimpleNamespace(stream="ERPILOT_COMMANDS", sequence=SimpleNamespace(stream=42),
                                 timestamp=datetime.now(UTC) - timedelta(seconds=30)))
    headers = dead_letter_headers(raw)
    msg_id = headers.pop("Nats-Msg-Id")
    assert headers == {
        "traceparent": "00-abc", "Erpilot-Original-Subject": "erpilot.v1.cmd.agent.tool_call",
        "Erpilot-Original-Stream": "ERPILOT_COMMANDS", "Erpilot-Original-Seq": "42",
        "Erpilot-Original-Msg-Id": "evt_1"}
    # Named after the original, with a part no other publisher on the dead-letter stream can foresee.
    assert msg_id.startswith("dlq:ERPILOT_COMMANDS:42.") and msg_id != dead_letter_headers(raw)["Nats-Msg-Id"]
    assert 29 < message_age_seconds(raw) < 300
    assert message_age_seconds(SimpleNamespace()) == 0.0
