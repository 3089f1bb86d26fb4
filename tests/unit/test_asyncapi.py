"""The committed AsyncAPI document (docs/asyncapi/erpilot.json) is the one the code generates.

After changing a contract, a subject or an endpoint: ``erpilot docs --out docs/asyncapi/erpilot.json``.
"""

from __future__ import annotations

import json

import pytest

from erpilot import asyncapi
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import DecideV1
from erpilot_contracts.erp.v1 import CommitOperationV1

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def generated() -> dict:
    return asyncapi.document()


def test_committed_document_matches_the_code(generated):
    committed = json.loads(asyncapi.DOCUMENT.read_text())
    assert committed == generated, "docs/asyncapi/erpilot.json is stale: run `erpilot docs --out " \
                                   "docs/asyncapi/erpilot.json` and commit it"


def test_each_endpoint_shows_its_contract_model(generated):
    decide = generated["channels"][f"approval:{subjects.APPROVAL_REQ_DECIDE}"]
    message_ref = next(iter(decide["messages"].values()))["$ref"].rsplit("/", 1)[-1]
    payload_ref = generated["components"]["messages"][message_ref]["payload"]["$ref"]
    assert payload_ref == "#/components/schemas/DecideV1"
    schemas = generated["components"]["schemas"]
    assert set(schemas["DecideV1"]["required"]) == set(DecideV1.model_json_schema()["required"])
    assert set(schemas["CommitOperationV1"]["properties"]) == set(CommitOperationV1.model_fields)


def test_every_subscription_and_outbox_event_is_documented(generated):
    channels = generated["channels"]
    for name in (f"erp:{subjects.ERP_CMD_COMMIT}", f"agent:{subjects.APPROVAL_EVT_RESOLVED}",
                 f"approval:{subjects.APPROVAL_QUERY_POLICY}", f"erp:{subjects.ERP_EVT_OPERATION_FINISHED}",
                 f"agent:{subjects.SESSION_EVENTS_ALL}"):
        assert name in channels, name
    actions = {name: op["action"] for name, op in generated["operations"].items()}
    # The approval service publishes its events and also consumes them itself (webhooks).
    assert actions[f"approval:{subjects.APPROVAL_EVT_RESOLVED}:published"] == "send"
    assert actions[f"approval:{subjects.APPROVAL_EVT_RESOLVED}"] == "receive"
    assert actions[f"approval:{subjects.APPROVAL_EVT_EXPIRING}:published"] == "send"
    assert actions[f"agent:{subjects.APPROVAL_EVT_EXPIRING}"] == "receive"
    assert actions[f"agent:{subjects.APPROVAL_EVT_RESOLVED}"] == "receive"
