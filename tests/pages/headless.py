"""Helpers of the browser tests (no tests here; the fixtures are in conftest.py): where Chromium
and the screenshots are, a signed-in Playwright session, `expect`, screenshots at two widths, and
the overflow measured on a page. Importing it skips the importer when Playwright is missing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


class Session:
    def __init__(self, browser, base_url: str, language: str):
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 860},
            locale=language,
            extra_http_headers={"Accept-Language": language},
            base_url=base_url,
        )
        self.page = self.context.new_page()
        self.console_errors: list[str] = []
        self.page.on("console", lambda message: message.type == "error" and self.console_errors.append(message.text))

    def login(self, email: str, password: str) -> None:
        self.page.goto("/accounts/login/")
        self.page.get_by_label(re.compile("Email|メールアドレス")).fill(email)
        self.page.get_by_label(re.compile("Password|パスワード")).fill(password)
        self.page.locator("form button[type=submit]").first.click()
        self.page.wait_for_url(re.compile(r"/w/\d+/ai-memory/$"))

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.evaluate("window.scrollTo(0, 0)")  # DevTools evaluation, not page script: the CSP still holds
        self.page.screenshot(path=str(path), full_page=True)
        return path


def expect(locator):
    return playwright_api.expect(locator)


WIDTHS = {"390": {"width": 390, "height": 844}, "1280": {"width": 1280, "height": 860}}


def shoot(session, name: str) -> None:
    for label, viewport in WIDTHS.items():
        session.page.set_viewport_size(viewport)
        session.shot(f"{name}_{label}")


def measure(page) -> dict:
    return page.evaluate(
        """() => {
            const wide = [...document.querySelectorAll('body *')].filter(el => {
                const box = el.getBoundingClientRect();
                const folded = el.closest('details:not([open])') && !el.closest('summary');  // not shown until opened
                return box.width > 0 && box.right > window.innerWidth + 1 && !el.closest('.table-wrap') && !folded;
            }).slice(0, 5).map(el => el.tagName.toLowerCase()
                + (el.className ? '.' + String(el.className).replace(/ /g, '.') : '')
                + '@' + Math.round(el.getBoundingClientRect().left) + '-' + Math.round(el.getBoundingClientRect().right)
                + ':' + (el.textContent || '').trim().slice(0, 30));
            const scrolling = [...document.querySelectorAll('.table-wrap')]
                .filter(w => w.scrollWidth > w.clientWidth + 1).length;
            // stacked: headings hidden
            const headless = c => c.closest('thead') && getComputedStyle(c.closest('thead')).position === 'absolute';
            const clipped = [...document.querySelectorAll('th, td')]
                .filter(c => !headless(c) && c.getBoundingClientRect().right > window.innerWidth + 1).length;
            return {
                scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
                wide, scrolling, clipped,
            };
        }"""
    )
