"""`/docs` and `/redoc` are off (issue 26): FastAPI's pages load Swagger UI / ReDoc from a CDN on the
origin that holds the console's cookie, outside its Content-Security-Policy, and no wheel we depend on
ships those assets to serve locally. The OpenAPI document stays at `/openapi.json` (SPEC §5)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from erpilot_gateway.app import create_app

from .fake_services import settings

pytestmark = pytest.mark.unit


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(settings("docs-test-" + "d" * 32), broker=object()))


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_cdn_backed_documentation_pages_are_not_served(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    assert "cdn" not in answer.text and "<script" not in answer.text


def test_the_openapi_document_is_still_served(client: TestClient) -> None:
    answer = client.get("/openapi.json")
    assert answer.status_code == 200 and "/v1/sessions" in answer.json()["paths"]
