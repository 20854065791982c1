"""A local stand-in for the GitHub REST endpoints mlaperf uses, over real HTTP.

``python fake_github.py STATE.json`` serves on 127.0.0.1 (a free port, printed on the first line of stdout)
until killed. The state lives in memory, starts from STATE.json when that file exists (a test seeds it)
and every change is written back so a test can read it:

- ``issues`` and ``comments``: the nightly's issues, and comments on issues and pull requests (each comment
  records the login of the token that wrote it);
- ``pulls``: open pull requests (``GET /pulls?head=owner:branch``); ``DELETE /issues/N/labels/NAME``
  removes a label from one (404 when it does not have it, as GitHub answers);
- ``statuses``: every commit status posted;
- ``get``: fixed answers by path (settings, environments, events, workflow runs, runner groups); a path
  missing there is a 404, as GitHub answers for a missing environment or an unset secret.

It checks what GitHub checks that matters here: the bearer token (each token is one login), JSON bodies,
the owner/name path.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

TOKENS = {"test-token": "github-actions[bot]", "other-token": "someone-else[bot]", "admin-token": "octo-admin"}
REPO = ["repos", "acme", "kernels"]
STATE: dict[str, Any] = {"issues": {}, "comments": [], "requests": [], "pulls": [], "statuses": [], "get": {}}
LOCK = threading.Lock()


def _page(items: list[Any], query: dict[str, list[str]]) -> list[Any]:
    page, per_page = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["30"])[0])
    return items[(page - 1) * per_page : page * per_page]


def _comment_url(comment: dict[str, Any]) -> str:
    return f"https://github.example/acme/kernels/pull/{comment['issue']}#issuecomment-{comment['id']}"


def _issues(method: str, parts: list[str], query: dict[str, list[str]], body: Any, login: str) -> tuple[int, Any]:
    """/repos/acme/kernels/issues[/...]: the nightly's issues, comments, a pull request's labels."""
    issues: dict[str, dict[str, Any]] = STATE["issues"]
    if method == "GET" and len(parts) == 4:
        label = query.get("labels", [""])[0]
        found = [i for i in issues.values() if i["state"] == "open" and label in i["labels"]]
        return 200, _page(found, query)
    if method == "POST" and len(parts) == 4:
        number = len(issues) + 1
        issues[str(number)] = {"number": number, "title": body["title"], "body": body["body"],
                               "labels": body.get("labels", []), "state": "open", "user": {"login": login}}  # fmt: skip
        return 201, issues[str(number)]
    if method == "PATCH" and len(parts) == 5 and parts[4] in issues:
        issues[parts[4]].update({k: v for k, v in body.items() if k in ("title", "body", "state")})
        return 200, issues[parts[4]]
    if len(parts) == 6 and parts[5] == "comments" and parts[4].isdigit():
        if method == "GET":
            mine = [c for c in STATE["comments"] if c["issue"] == int(parts[4])]
            return 200, _page([{"id": c["id"], "body": c["body"], "user": {"login": c["user"]}} for c in mine], query)
        if method == "POST":
            comment = {"issue": int(parts[4]), "body": body["body"], "id": 1000 + len(STATE["comments"]),
                       "user": login}  # fmt: skip
            STATE["comments"].append(comment)
            return 201, {"id": comment["id"], "html_url": _comment_url(comment)}
    if method == "PATCH" and len(parts) == 6 and parts[4] == "comments":
        for c in STATE["comments"]:
            if str(c["id"]) == parts[5]:
                if c["user"] != login:
                    return 403, {"message": "Resource not accessible by integration"}
                c["body"] = body["body"]
                return 200, {"id": c["id"], "html_url": _comment_url(c)}
    if method == "DELETE" and len(parts) == 7 and parts[5] == "labels":
        for pr in STATE["pulls"]:
            if str(pr["number"]) == parts[4] and any(x["name"] == unquote(parts[6]) for x in pr["labels"]):
                pr["labels"] = [x for x in pr["labels"] if x["name"] != unquote(parts[6])]
                return 200, pr["labels"]
        return 404, {"message": "Label does not exist"}
    return 404, {"message": "Not Found"}


def route(method: str, path: str, query: dict[str, list[str]], body: Any, login: str) -> tuple[int, Any]:
    parts = path.strip("/").split("/")
    if parts[:3] == REPO and len(parts) >= 4 and parts[3] == "issues" and path not in STATE["get"]:
        return _issues(method, parts, query, body, login)
    if parts[:3] == REPO and parts[3:] == ["pulls"] and method == "GET":
        head = query.get("head", [""])[0]
        found = [p for p in STATE["pulls"] if f"{p['head']['owner']}:{p['head']['ref']}" == head]
        return 200, _page(found, query)
    if parts[:3] == REPO and len(parts) == 5 and parts[3] == "statuses" and method == "POST":
        STATE["statuses"].append({"sha": parts[4], **body, "by": login})
        return 201, {"state": body["state"]}
    if method == "GET" and path in STATE["get"]:
        answer = STATE["get"][path]
        return 200, _page(answer, query) if isinstance(answer, list) else answer
    return 404, {"message": "Not Found"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:  # quiet
        pass

    def _reply(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlparse(self.path)
        auth = self.headers.get("Authorization") or ""
        login = TOKENS.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if login is None:
            return self._reply(401, {"message": "Bad credentials"})
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        with LOCK:
            STATE["requests"].append([method, url.path])
            reply = route(method, url.path, parse_qs(url.query), body, login)
            Path(sys.argv[1]).write_text(json.dumps(STATE, indent=2))
        return self._reply(*reply)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")


if __name__ == "__main__":
    if Path(sys.argv[1]).exists():
        STATE.update(json.loads(Path(sys.argv[1]).read_text()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
