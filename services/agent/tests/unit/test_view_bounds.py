"""The session view's bound on tool results: sizes are UTF-8 bytes of compact JSON."""

from __future__ import annotations

import pytest

from erpilot_agent.domain.view_bounds import VIEW_RESULT_BYTES, bounded_result

pytestmark = pytest.mark.unit


def test_the_bound_is_16_kib():
    assert VIEW_RESULT_BYTES == 16384


def test_a_result_of_exactly_the_limit_is_kept_whole():
    result = {"a": "x" * (16384 - 8)}  # {"a":"…"} is 8 bytes around the text
    assert bounded_result(result, session_id="ses_1", call_id="c1") is result


def test_one_byte_over_is_replaced_by_a_marker_naming_the_call_url():
    result = {"a": "x" * (16384 - 7)}
    assert bounded_result(result, session_id="ses_1", call_id="run_9:call_2") == {
        "omitted": True, "reason": "result_too_large", "size_bytes": 16385, "limit_bytes": 16384,
        "href": "/v1/sessions/ses_1/tool-calls/run_9:call_2"}


def test_non_ascii_text_counts_in_utf8_bytes_and_the_call_id_is_quoted():
    marker = bounded_result({"a": "é" * 10}, session_id="ses_1", call_id="a b", limit=20)
    assert marker["size_bytes"] == 28 and marker["href"] == "/v1/sessions/ses_1/tool-calls/a%20b"


def test_no_result_stays_none():
    assert bounded_result(None, session_id="ses_1", call_id="c1") is None
