"""A local stand-in for the few GitHub REST endpoints the nightly uses (issues, comments), over real HTTP.

``python fake_github.py STATE.json`` serves on 127.0.0.1 (a free port, printed on the first line of stdout)
until killed; the issues live in memory and every change is written to STATE.json so a test can read them.
It checks what GitHub checks that matters here: the bearer token, JSON bodies, the owner/name path.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

TOKEN = "test-token"
STATE: dict[str, object] = {"issues": {}, "comments": [], "requests": []}
LOCK = threading.Lock()


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
        parts = url.path.strip("/").split("/")
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._reply(401, {"message": "Bad credentials"})
        if parts[:3] != ["repos", "acme", "kernels"] or len(parts) < 4 or parts[3] != "issues":
            return self._reply(404, {"message": "Not Found"})
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        issues: dict[str, dict[str, object]] = STATE["issues"]  # type: ignore[assignment]
        with LOCK:
            STATE["requests"].append([method, url.path])  # type: ignore[union-attr]
            if method == "GET" and len(parts) == 4:
                query = parse_qs(url.query)
                label = query.get("labels", [""])[0]
                page = int(query.get("page", ["1"])[0])
                found = [i for i in issues.values() if i["state"] == "open" and label in i["labels"]]
                return self._reply(200, found[(page - 1) * 100 : page * 100])
            if method == "POST" and len(parts) == 4:
                number = len(issues) + 1
                issues[str(number)] = {"number": number, "title": body["title"], "body": body["body"],
                                       "labels": body.get("labels", []), "state": "open"}  # fmt: skip
                reply = (201, issues[str(number)])
            elif method == "PATCH" and len(parts) == 5 and parts[4] in issues:
                issues[parts[4]].update({k: v for k, v in body.items() if k in ("title", "body", "state")})
                reply = (200, issues[parts[4]])
            elif method == "POST" and len(parts) == 6 and parts[5] == "comments" and parts[4] in issues:
                STATE["comments"].append({"issue": int(parts[4]), "body": body["body"]})  # type: ignore[union-attr]
                reply = (201, {"id": len(STATE["comments"])})  # type: ignore[arg-type]
            else:
                reply = (404, {"message": "Not Found"})
            Path(sys.argv[1]).write_text(json.dumps(STATE, indent=2))
        return self._reply(*reply)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")


if __name__ == "__main__":
    if Path(sys.argv[1]).exists():
        STATE.update(json.loads(Path(sys.argv[1]).read_text()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
