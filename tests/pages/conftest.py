"""Fixtures of the browser tests: one headless Chromium per test module (Playwright), and
`open_session`, which opens signed-out browser sessions on the live server and fails the test on
any Content-Security-Policy violation. The helpers are in tests/pages/headless.py, imported here
when a fixture runs (it skips its importer when Playwright is missing; the page tests that use
Django's test client need no browser)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def chromium():
    # Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make
    # between browser steps are still plain synchronous code.
    from tests.pages.headless import CHROMIUM, CHROMIUM_ARGS, playwright_api

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def open_session(chromium, live_server):
    from tests.pages.headless import Session

    sessions: list[Session] = []

    def open_(language: str = "en") -> Session:
        session = Session(chromium, live_server.url, language)
        sessions.append(session)
        return session

    yield open_
    for session in sessions:
        # The CSP allows only our own stylesheet and script: any violation shows up here.
        assert not [e for e in session.console_errors if "Content Security Policy" in e], session.console_errors
        session.context.close()
