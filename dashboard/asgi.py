"""What ``mlaperf dashboard`` serves: ``app.py`` in Streamlit's ASGI server (``st.App``) with one middleware,
``BackendHint``, that writes the server's address into each page's HTML (``window.__streamlit``, the hook
Streamlit's frontend reads for hosted setups). Without it, a page opened at its own address (``/history``,
every shared link) first takes ``/history/`` for the server's root, probes ``/history/_stcore/health``,
fails, waits the frontend's retry delay and only then connects at ``/``: 0.06-0.13 s of every deep link's
first render on 2 cores (``docs/dashboard.md``).

Run by ``streamlit run dashboard/asgi.py`` (``dashboard.serve``); a Streamlit without ``st.App`` runs
``app.py`` as before (``serve.app_script``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEAD_TAG = b"<head>"


def hint_script(base_path: str) -> bytes:
    """The inline script that tells the frontend the server's root: this origin at ``base_path`` (Streamlit's
    ``server.baseUrlPath``, '' for none). Runs before the frontend's module script reads the hook."""
    root = "/" + base_path.strip("/")
    return (f"<script>window.__streamlit=Object.assign(window.__streamlit||{{}},"
            f"{{BACKEND_BASE_URL:location.origin+{json.dumps(root)}}})</script>").encode()


def with_hint(html: bytes, script: bytes) -> bytes:
    """``html`` with ``script`` right after its ``<head>`` tag (unchanged when it has none)."""
    at = html.find(HEAD_TAG)
    return html if at < 0 else html[: at + len(HEAD_TAG)] + script + html[at + len(HEAD_TAG):]


def _is_page_request(scope: Scope) -> bool:
    # A browser's navigation (it accepts HTML): the only responses that can be the app's index.html.
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    accept = dict(scope["headers"]).get(b"accept", b"")
    return b"text/html" in accept


class BackendHint:
    """ASGI middleware: the app's HTML pages get ``hint_script``; everything else passes untouched. Page
    requests are served uncompressed (the page is 6 kB), so the body can be edited as it is."""

    def __init__(self, app: ASGIApp, base_path: str = "") -> None:
        self.app = app
        self.script = hint_script(base_path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_page_request(scope):
            await self.app(scope, receive, send)
            return
        scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k != b"accept-encoding"])
        start: Message | None = None
        body: list[bytes] = []

        async def edit(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if b"text/html" in headers.get(b"content-type", b"") and b"content-encoding" not in headers:
                    start = message  # held until the whole body is in
                    return
                await send(message)
            elif start is not None and message["type"] == "http.response.body":
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    html = with_hint(b"".join(body), self.script)
                    headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
                    await send({**start, "headers": [*headers, (b"content-length", str(len(html)).encode())]})
                    await send({"type": "http.response.body", "body": html})
            else:
                await send(message)

        await self.app(scope, receive, edit)


BASE_PATH = str(config.get_option("server.baseUrlPath") or "")
# Module level and literal: ``streamlit run`` finds the app by reading this file's syntax tree.
app = st.App("app.py", middleware=[Middleware(BackendHint, base_path=BASE_PATH)])
