"""Webhook configuration, signatures, retry schedule and the text people read (no I/O)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import timedelta

import pytest

from erpilot_approval.domain import notices
from erpilot_approval.domain.policy import PolicyError, load_policy
from erpilot_approval.domain.webhooks import Webhook, WebhookConfigError, backoff, event_id, parse_webhooks, sign

pytestmark = pytest.mark.unit
KEY = b"0123456789abcdef0123456789abcdef"


def test_signatures_follow_standard_webhooks():
    hook = Webhook(url="https://example.test/h", events=("approval.requested",),
                   secret="whsec_" + base64.b64encode(KEY).decode())
    body = b'{"type":"approval.requested"}'

    headers = sign(hook, "msg_1", 1_700_000_000, body)

    expected = base64.b64encode(hmac.new(KEY, b"msg_1.1700000000." + body, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == f"v1,{expected}"
    assert headers["webhook-id"] == "msg_1" and headers["webhook-timestamp"] == "1700000000"
    plain = Webhook(url=hook.url, events=hook.events, secret="a-plain-secret-of-some-length")
    assert sign(plain, "msg_1", 1, body) != sign(hook, "msg_1", 1, body)


def test_event_ids_are_stable_per_event_and_differ_between_events():
    assert event_id("approval.requested", "pa_1") == event_id("approval.requested", "pa_1")
    assert event_id("approval.requested", "pa_1") != event_id("approval.resolved", "pa_1")
    assert event_id("approval.requested", "pa_1") != event_id("approval.requested", "pa_2")


def test_backoff_doubles_and_is_capped():
    assert [backoff(n, 1.0).total_seconds() for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff(40, 1.0) == timedelta(minutes=10)


@pytest.mark.parametrize(("entry", "key"), [
    ({"url": "ftp://x", "secret": "s" * 16}, "url"),
    ({"url": "https://x", "secret": "short"}, "secret"),
    ({"url": "https://x", "secret": "whsec_!!not base64!!"}, "secret"),
    ({"url": "https://x", "secret": "s" * 16, "events": ["approval.maybe"]}, "events"),
    ({"url": "https://x", "secret": "s" * 16, "events": []}, "events"),
    ({"url": "https://x", "secret": "s" * 16, "colour": "red"}, "colour"),
])
def test_a_malformed_webhook_names_its_key(entry, key):
    with pytest.raises(WebhookConfigError, match=rf"hooks\[0\]\.{key}"):
        parse_webhooks([entry], "hooks")


def test_the_policy_file_takes_webhooks_and_warn_before():
    policy = load_policy('[tools.refund_payment]\nwarn_before = "5m"\n\n'
                         '[[webhooks]]\nurl = "https://hooks.example/x"\nevents = ["approval.requested"]\n'
                         'secret = "0123456789abcdef"\n')
    assert policy.tools["refund_payment"].warn_before == timedelta(minutes=5)
    assert policy.tools["submit_order"].warn_before is None  # off by default
    assert policy.webhooks == (Webhook("https://hooks.example/x", ("approval.requested",), "0123456789abcdef"),)
    assert load_policy(None).version == load_policy('[tools.get_product]\naction = "allow"\n').version
    with pytest.raises(PolicyError, match=r"tools\.refund_payment\.warn_before"):
        load_policy('[tools.refund_payment]\nwarn_before = "soon"\n')
    with pytest.raises(PolicyError, match=r"webhooks\[0\]\.url"):
        load_policy('[[webhooks]]\nurl = "nope"\nsecret = "0123456789abcdef"\n')


def test_an_amount_rule_may_warn_earlier_or_alone():
    policy = load_policy('[[tools.submit_order.rules]]\nmin_amount_minor = 1000000\nroles = ["manager"]\n'
                         'warn_before = "1h"\n')
    submit = policy.tools["submit_order"]
    assert submit.warn_before_for(5_000) is None and submit.warn_before_for(2_000_000) == timedelta(hours=1)
    assert submit.longest_warning() == timedelta(hours=1) and policy.tools["cancel_order"].longest_warning() is None
    both = load_policy('[tools.submit_order]\nwarn_before = "5m"\n[[tools.submit_order.rules]]\n'
                       'min_amount_minor = 100\nroles = ["manager"]\n').tools["submit_order"]
    assert both.warn_before_for(500) == timedelta(minutes=5)  # a rule without warn_before keeps the tool's
    with pytest.raises(PolicyError, match=r"rules\[0\]\.warn_before"):
        load_policy('[[tools.submit_order.rules]]\nmin_amount_minor = 1\nroles = ["manager"]\nwarn_before = 5\n')


def test_the_text_reads_like_a_person_wrote_it_and_cannot_forge_links():
    refund = {"order_id": "O-5101", "amount_minor": 12000, "currency": "EUR", "channel": "original"}
    what = notices.subject("refund_payment", refund, {"amount_minor": 12000, "currency": "EUR"})
    assert notices.requested(what, ["manager"], "https://e/resume/pa_1") == (
        "Refund 120.00 EUR on O-5101 awaits a manager — approve: <https://e/resume/pa_1>")
    assert notices.roles_phrase(["approver", "manager"]) == "an approver or a manager"
    order = notices.subject("submit_order", {}, {"amount_minor": 5760, "currency": "EUR",
                                                 "target": "Evil <https://phish|click> & Co"})
    assert order == "Order 57.60 EUR for Evil &lt;https://phish|click&gt; &amp; Co"
    assert notices.resolved(what, "expired", "system:expiry") == (
        "Refund 120.00 EUR on O-5101 expired without a decision")
    assert notices.finished(what, "rejected", "stock_changed") == (
        "Refund 120.00 EUR on O-5101 was not carried out (stock_changed)")


def test_each_write_is_headlined_by_its_catalog_headline_with_escaped_arguments():
    credit = {"order_id": "O-<5101>", "amount_minor": 2500, "currency": "EUR", "reason": "late"}
    assert notices.subject("issue_credit_note", credit, {"amount_minor": 2500, "currency": "EUR"}) == (
        "Credit note 25.00 EUR on O-&lt;5101&gt;")
    assert notices.subject("cancel_order", {"order_id": "O-7"}, {}) == "Cancellation of O-7"
    assert notices.subject("adjust_stock", {"sku": "SKU-1", "delta": -3, "reason": "r"}, {}) == (
        "Stock change -3 on SKU-1")
    # arguments that do not fit the headline get the generic line, never an exception
    assert notices.subject("adjust_stock", {"sku": "SKU-1"}, {"operation": "Adjust stock", "object": "SKU-1"}) == (
        "Adjust stock SKU-1")
