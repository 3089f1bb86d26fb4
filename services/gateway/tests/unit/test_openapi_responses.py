"""Typed to the edges (issue 33): every route of ``/openapi.json`` names the model of each answer it gives on
success (a ``$ref`` to a component schema: a contract's reply model, or ``erpilot_gateway.answers``), so a
client reads from the document what comes back; only a 204 has no body to describe."""

from __future__ import annotations

import pytest

from .fake_services import RecordingServices, gateway_client

pytestmark = pytest.mark.unit


def _document() -> dict:
    return gateway_client(RecordingServices(lambda subject, payload: {}), "s" * 40).get("/openapi.json").json()


def undescribed(document: dict) -> list[str]:
    """``METHOD path status`` of every success answer without a schema that names a model."""
    missing = []
    components = document.get("components", {}).get("schemas", {})
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            answers = {code: answer for code, answer in operation.get("responses", {}).items() if code.startswith("2")}
            if not answers:
                missing.append(f"{method.upper()} {path} (no success answer)")
            for code, answer in answers.items():
                if code == "204":
                    continue
                schemas = [media.get("schema", {}) for media in answer.get("content", {}).values()]
                named = [schema["$ref"].rsplit("/", 1)[-1] for schema in schemas if "$ref" in schema]
                if not named or any(name not in components for name in named):
                    missing.append(f"{method.upper()} {path} {code}")
    return missing


def test_every_route_shows_the_schema_of_its_answer():
    document = _document()
    assert len(document["paths"]) >= 25  # the walk sees the routes
    assert undescribed(document) == []


def test_a_route_answering_a_bare_object_is_found():
    document = {"paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": True}}}}}}, "delete": {"responses": {"204": {}}}},
        "/y": {"post": {"responses": {"201": {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/Gone"}}}}}}}}, "components": {"schemas": {}}}
    assert undescribed(document) == ["GET /x 200", "POST /y 201"]


def test_the_answers_show_the_contract_models():
    paths = _document()["paths"]
    shown = {(path, method): next(iter(operation["responses"][code]["content"].values()))["schema"]["$ref"]
             for path, method, code in (("/v1/approvals/{pending_id}", "get", "200"), ("/v1/sessions", "get", "200"),
                                        ("/v1/erp/orders/{order_id}", "get", "200"))
             for operation in [paths[path][method]]}
    assert [ref.rsplit("/", 1)[-1] for ref in shown.values()] == ["ApprovalRecordV1", "SessionPageV1", "OrderV1"]
