"""A small GitHub REST client for the nightly's alert issues (standard library only).

It reads the same variables GitHub Actions sets: ``GITHUB_API_URL`` (so a test can point it at a local
server), ``GITHUB_REPOSITORY`` (owner/name) and the token from ``GITHUB_TOKEN``. The token needs only
``issues: write``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_API = "https://api.github.com"


class GitHubError(RuntimeError):
    """A GitHub API call failed (status and message of the response)."""


@dataclass
class Issue:
    number: int
    title: str
    body: str


class GitHub:
    def __init__(self, repository: str, token: str, api_url: str = DEFAULT_API, timeout: float = 30.0) -> None:
        if repository.count("/") != 1:
            raise ValueError(f"GITHUB_REPOSITORY {repository!r}: expected owner/name")
        self.repository = repository
        self.token = token
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout

    @classmethod
    def from_env(cls) -> GitHub:
        missing = [v for v in ("GITHUB_REPOSITORY", "GITHUB_TOKEN") if not os.environ.get(v)]
        if missing:
            raise ValueError(f"{' and '.join(missing)} not set (the workflow step passes them)")
        return cls(os.environ["GITHUB_REPOSITORY"], os.environ["GITHUB_TOKEN"],
                   os.environ.get("GITHUB_API_URL") or DEFAULT_API)  # fmt: skip

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.api_url}/repos/{self.repository}{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
                "User-Agent": "mlaperf-nightly",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise GitHubError(f"{method} {path}: HTTP {exc.code} {detail}") from None
        except urllib.error.URLError as exc:
            raise GitHubError(f"{method} {path}: {exc.reason}") from None
        return json.loads(raw) if raw else None

    def open_issues(self, label: str) -> list[Issue]:
        issues: list[Issue] = []
        for page in range(1, 51):
            query = urllib.parse.urlencode({"state": "open", "labels": label, "per_page": 100, "page": page})
            batch = self._call("GET", f"/issues?{query}")
            for item in batch:
                if "pull_request" not in item:
                    issues.append(Issue(int(item["number"]), item.get("title") or "", item.get("body") or ""))
            if len(batch) < 100:
                break
        return issues

    def create_issue(self, title: str, body: str, labels: list[str]) -> int:
        return int(self._call("POST", "/issues", {"title": title, "body": body, "labels": labels})["number"])

    def update_issue(self, number: int, title: str, body: str) -> None:
        self._call("PATCH", f"/issues/{number}", {"title": title, "body": body})

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/issues/{number}/comments", {"body": body})

    def close_issue(self, number: int) -> None:
        self._call("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": "completed"})
