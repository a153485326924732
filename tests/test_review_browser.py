"""The review page in a real browser: headless Chromium, driven by Playwright, clicks
accept and reject on the page the review server serves, and the decisions file changes.

Needs Debian's Chromium at /usr/bin/chromium (``apt-get install chromium``; Playwright
drives it, no browser download) and the ``playwright`` package. Without them the test
is skipped, unless VLMROBUST_REQUIRE_BROWSER=1 (CI), where it fails instead.
"""

from __future__ import annotations

import csv
import os
import re
import threading
from pathlib import Path

import pytest

from vlmrobust.review import apply_decisions, build_review_page, read_candidates, read_decisions
from vlmrobust.review import server as review_server

from .test_review import make_candidates

CHROMIUM = os.environ.get("VLMROBUST_CHROMIUM", "/usr/bin/chromium")
# Headless Chromium as root, offline: no sandbox, no GPU, and none of the background
# traffic (updates, sync, QUIC probes) that floods a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser_or_skip():
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "the playwright package is not installed"
    if reason is None and not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if reason is not None:
        if os.environ.get("VLMROBUST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"VLMROBUST_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture
def chromium_page(tmp_path):
    sync_playwright = _browser_or_skip()
    with sync_playwright() as pw:
        # Playwright gives the browser a fresh temporary profile (--user-data-dir).
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()


@pytest.mark.slow
def test_review_round_trip_in_chromium(chromium_page, tmp_path):
    from playwright.sync_api import expect

    page, js_errors = chromium_page
    candidates = make_candidates(tmp_path, 3)
    decisions = tmp_path / "resources" / "distraction" / "decisions.csv"
    srv = review_server.make_server(
        candidates, decisions, "127.0.0.1", 0, image_base=tmp_path, reviewer="tester"
    )
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        page.goto(srv.url)
        cards = page.locator("section.card")
        expect(cards).to_have_count(3)
        first = page.locator('[data-sample-id="mathvista-1"]')
        second = page.locator('[data-sample-id="mathvista-2"]')
        third = page.locator('[data-sample-id="mathvista-3"]')
        page.wait_for_function(
            "() => [...document.querySelectorAll('#card-1 img')]"
            ".every(i => i.complete && i.naturalWidth === 24)"
        )

        first.locator("button.accept").click()
        expect(first.locator("[data-role=status]")).to_have_text(re.compile(r"^accepted"))
        expect(first).to_have_attribute("data-decision", "accept")

        second.locator("input[name=criterion][value=factual]").check()
        second.locator("textarea.note").fill("the label 'x=7' contradicts the figure")
        second.locator("button.reject").click()
        expect(second.locator("[data-role=status]")).to_have_text(
            re.compile(r"^rejected · fails factual · tester ")
        )
        expect(page.locator("#count-accepted")).to_have_text("1")
        expect(page.locator("#count-rejected")).to_have_text("1")
        expect(page.locator("#count-undecided")).to_have_text("1")

        # A reject without a criterion is refused by the server and shown on the card.
        third.locator("button.reject").click()
        expect(third.locator("[data-role=error]")).to_contain_text(
            "Not saved: decision: 'mathvista-3' is rejected without a failed criterion"
        )
        expect(third).to_have_attribute("data-decision", "")

        # A reload shows the saved state (rendered by the server from the file).
        page.reload()
        expect(second).to_have_attribute("data-decision", "reject")
        expect(second.locator("textarea.note")).to_have_value(
            "the label 'x=7' contradicts the figure"
        )
        expect(second.locator("input[value=factual]")).to_be_checked()
        assert js_errors == []
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)

    with open(decisions, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["sample_id", "decision", "criteria_failed", "note", "reviewer", "time"]
    assert [r[:5] for r in rows[1:]] == [
        ["mathvista-1", "accept", "", "", "tester"],
        ["mathvista-2", "reject", "factual", "the label 'x=7' contradicts the figure", "tester"],
    ]
    cands = read_candidates(candidates)
    accepted, report = apply_decisions(
        cands, read_decisions(decisions, [c.sample_id for c in cands])
    )
    assert accepted == ["mathvista-1"]
    assert (report["accepted"], report["rejected"], report["undecided"]) == (1, 1, 1)
    assert report["rejected_by_criterion"] == {
        "obvious": 0,
        "factual": 1,
        "irrelevant": 0,
        "dead_end": 0,
    }
    assert report["undecided_ids"] == ["mathvista-3"]


@pytest.mark.slow
def test_static_page_from_disk_is_read_only(chromium_page, tmp_path):
    from playwright.sync_api import expect

    page, js_errors = chromium_page
    cands = read_candidates(make_candidates(tmp_path, 2))
    out = build_review_page(cands, {}, tmp_path / "pages" / "review.html", image_base=tmp_path)
    page.goto(out.resolve().as_uri())
    page.wait_for_function(
        "() => [...document.querySelectorAll('#card-1 img')]"
        ".every(i => i.complete && i.naturalWidth === 24)"
    )
    card = page.locator('[data-sample-id="mathvista-1"]')
    card.locator("button.accept").click()
    expect(card.locator("[data-role=error]")).to_contain_text("Read-only copy")
    expect(card).to_have_attribute("data-decision", "")
    assert js_errors == []
    assert not list(tmp_path.glob("**/*.csv"))
