"""The served dashboard behind `serve --basic-auth`'s login, in a real headless Chromium: sent to the login
page first, then, logged in, the whole app renders and its websocket is open; nothing fails to load but
not even the login page's logo (Panel's CDN, offline: it is this server's copy)."""
from __future__ import annotations

from tests.support.browser import open_page
from tests.support.serving import USERS, serve_dashboard, users_file


def test_the_dashboard_renders_after_logging_in(browser, checkpoints, tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")  # not what this test looks at
    with serve_dashboard(monkeypatch, "--basic-auth", users_file(tmp_path)) as url:
        page, problems = open_page(browser, url)
        page.wait_for_url("**/login**")  # sent to log in first
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", USERS["alice"])
        page.locator("form").evaluate("form => form.submit()")
        page.locator(".bk-tab", has_text="Model").wait_for(timeout=60_000)  # the whole app, its tabs
        page.locator(".heatmap-view").first.wait_for(state="visible", timeout=60_000)
        # the model's summary reached the header: the page's websocket is open, under the login
        page.locator(".dashboard-header").get_by_text("NELBO").wait_for(timeout=60_000)
        assert page.title() == "mdlm-explorer"
        page.screenshot(path=str(tmp_path / "after-login.png"))
    # nothing failed to load, the login page's logo and icon included (they were Panel's CDN's)
    assert problems == []
