"""Row <-> domain conversions: what is stored comes back as the same value."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from erpilot_erp.adapters import rows

pytestmark = pytest.mark.unit


def through_json(value):
    return json.loads(json.dumps(value))


def test_a_revision_snapshot_round_trips_with_the_draft_rows_session_and_status(catalog):
    draft = catalog.create([("SKU-A", 2), ("SKU-B", 1)], note="dock 3")

    snapshot = through_json(rows.revision_snapshot(draft))
    back = rows.revision(snapshot, session_id=draft.session_id, status="submitted", owner=draft.owner)

    assert "status" not in snapshot and "session_id" not in snapshot and "owner" not in snapshot
    assert back == replace(draft, status="submitted")


def test_an_order_row_round_trips_with_the_session_and_the_owner_it_came_from(catalog):
    order = replace(catalog.order(draft_id="D-9", revision=2), session_id="S-1", owner="alice")

    values = rows.order_values(order)
    back = rows.order(SimpleNamespace(**{**values, "lines": through_json(values["lines"])}))

    assert back == order and values["session_id"] == "S-1" and values["owner"] == "alice"
    assert "session_id" not in order.to_result() and "owner" not in order.to_result()  # never shown to the model
