"""Browser tests: Playwright drives Debian's Chromium (``apt-get install -y chromium``).

Playwright cannot download its own browser here, so the tests launch the system ``chromium`` and skip,
saying so, when it is absent. Two kinds of tests live here:

- ``test_console_*``: the real gateway app (console, approval page, /v1 routes, SSE bridge on a real
  NATS) in-process, with the other services replaced by ``harness.FakeServices`` so every page state
  (expired, decided, superseded, hostile text, …) can be set up exactly;
- ``test_flows``: the whole stack as processes (the e2e ``stack`` fixture), driven only through the
  browser and the HTTP API.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import admin, approver, manager, requester, stack  # noqa: F401  (fixtures)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: the web console and approval page driven in Chromium (Playwright)")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); browser tests need it")
    return path


@pytest.fixture(scope="module")
def browser(chromium_path):
    """Per module: Playwright's sync API runs an event loop in this thread while it is open, and
    session fixtures that set up later (the stack's migrations) need ``asyncio.run`` here."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def browser_page(browser):
    """``browser_page(base_url, **context_options)``: a page in a fresh browser context (own cookies and
    storage; options such as locale, time zone, viewport or javascript off). Script errors and Content
    Security Policy refusals fail the test."""
    contexts = []

    def open_page(base_url: str, **options):
        context = browser.new_context(base_url=base_url, **{"viewport": {"width": 1360, "height": 900}, **options})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.on("console", lambda msg: page.errors.append(msg.text)
                if msg.type == "error" and "Content Security Policy" in msg.text else None)
        return page

    yield open_page
    for context in contexts:
        for page in context.pages:
            assert not page.errors, f"JavaScript errors on {page.url}: {page.errors}"
        context.close()


@pytest.fixture
def new_page(browser_page):
    """``new_page(base_url, token=None)``: a fresh page, signed in through the console's ``/?token=`` link
    when a token is given."""
    def open_page(base_url: str, token: str | None = None):
        page = browser_page(base_url)
        if token is not None:
            page.goto(f"/?token={token}")
        return page

    return open_page


@pytest.fixture
def open_page(browser_page):
    """``open_page(console, token, **context_options)``: a page signed in by the token's cookie, nothing
    opened yet (locale, time zone, javascript on or off as the options say)."""
    def open_(console, token: str, **options):
        page = browser_page(console.base_url, viewport={"width": 1360, "height": 1000}, **options)
        page.context.add_cookies([{"name": "erpilot_token", "value": token, "url": console.base_url}])
        return page

    return open_


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def console(nats_url, chromium_path):
    """The gateway's console in-process on stand-in services (tests/browser/harness.py), one per module."""
    from tests.browser.harness import ConsoleServer

    server = ConsoleServer(nats_url)
    server.start()
    yield server
    server.stop()
