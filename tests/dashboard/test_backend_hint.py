"""The served app's page HTML tells Streamlit's frontend where the server is (``dashboard.asgi``): a page
opened at its own address connects at once instead of probing ``<page>/_stcore/`` and waiting a retry."""

from __future__ import annotations

import gzip
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit
from conftest import CHROMIUM, Seeded, need_chromium

from dashboard import asgi


def test_hint_goes_right_after_head() -> None:
    script = asgi.hint_script("")
    html = b"<!DOCTYPE html><html><head><meta charset=utf-8><script type=module src=x.js></script></head></html>"
    out = asgi.with_hint(html, script)
    assert out.startswith(b"<!DOCTYPE html><html><head>" + script + b"<meta")
    assert out.count(b"BACKEND_BASE_URL") == 1
    assert asgi.with_hint(b"<p>no head</p>", script) == b"<p>no head</p>"


def test_hint_names_the_base_url_path() -> None:
    assert b'location.origin+"/"' in asgi.hint_script("")
    assert b'location.origin+"/perf/mla"' in asgi.hint_script("/perf/mla/")
    # A quote in the configured path cannot end the script's string.
    assert b'"/a\\"b"' in asgi.hint_script('a"b')


@pytest.fixture(scope="module")
def served(seeded: Seeded) -> Iterator[str]:
    from dashboard.served import Served

    with Served(seeded.url) as server:
        yield server.base


def _get(url: str, accept: str, encoding: str = "gzip") -> tuple[dict[str, str], bytes]:
    req = urllib.request.Request(url, headers={"Accept": accept, "Accept-Encoding": encoding})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return {k.lower(): v for k, v in resp.headers.items()}, resp.read()


def test_served_pages_carry_the_hint_and_assets_do_not(served: str) -> None:
    for path in ("", "history", "compare?cmp_base=abc"):
        headers, body = _get(f"{served}/{path}", "text/html,application/xhtml+xml,*/*;q=0.8")
        assert "content-encoding" not in headers, path  # served plain, so the body could be edited
        assert int(headers["content-length"]) == len(body), path
        assert body.count(b"window.__streamlit=") == 1 and b'BACKEND_BASE_URL:location.origin+"/"' in body, path
    assert _get(f"{served}/_stcore/health", "*/*")[1] == b"ok"
    script = next((Path(streamlit.__file__).parent / "static" / "static" / "js").glob("index.*.js"))
    headers, body = _get(f"{served}/static/js/{script.name}", "*/*")
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    assert body == script.read_bytes()  # assets pass untouched


def test_a_deep_link_connects_without_probing_its_own_path(served: str) -> None:
    """Chromium opens /history and /efficiency at their own addresses: the frontend never asks
    ``<page>/_stcore/...`` (the probe the hint removes) and the page runs."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Watcher

    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            for path in ("history", "efficiency"):
                page = browser.new_page()
                page.on("request", lambda r: requested.append(r.url))
                watch = Watcher(page)
                page.goto(f"{served}/{path}", wait_until="commit")
                watch.wait_run(page, 0)
                assert page.locator('[data-testid="stHeading"]').first.inner_text(), path
                page.close()
        finally:
            browser.close()
    assert any(u.startswith(f"{served}/_stcore/health") for u in requested), requested
    probes = [u for u in requested if "/_stcore/" in u and not u.startswith(f"{served}/_stcore/")]
    assert not probes, probes
