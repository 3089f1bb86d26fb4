"""Tool arguments from the model are hostile input too (SPEC §8): refused as ``invalid_arguments``."""

from __future__ import annotations

import pytest

from erpilot_agent.domain.runs import ArgumentsNotJson, parse_arguments

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", [
    '{"sku": "A", "sku": "B"}', '{"query": "\\ud800"}', "[" * 50_000 + "]" * 50_000,
    '{"a": ' + "[" * 65 + "]" * 65 + "}",
    '{"reason": "x\\u0000"}', '{"qty": 9223372036854775808}', '{"qty": NaN}', "{not json",
])
def test_hostile_model_arguments_are_refused(text: str) -> None:
    with pytest.raises(ArgumentsNotJson):
        parse_arguments(text)


def test_ordinary_model_arguments_are_read() -> None:
    assert parse_arguments('{"sku": "SKU-PAPER-A4", "qty": 2}') == {"sku": "SKU-PAPER-A4", "qty": 2}
    assert parse_arguments("") == {} and parse_arguments("  ") == {}
