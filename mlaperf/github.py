"""A small GitHub REST client (standard library only): the nightly's alert issues, the pull-request gate and
comment (:mod:`mlaperf.pr_gate`, :mod:`mlaperf.pr_post`) and ``scripts/check-repo-settings``.

It reads the same variables GitHub Actions sets: ``GITHUB_API_URL`` (so a test can point it at a local
server), ``GITHUB_REPOSITORY`` (owner/name) and the token from ``GITHUB_TOKEN``. Each caller's workflow
job grants only the permissions its calls need (alerts: ``issues: write``).
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

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Issue:
    number: int
    title: str
    body: str


@dataclass(frozen=True)
class Reviewers:
    """The required-reviewer protection of a deployment environment."""

    count: int  # required reviewers over all its rules; 0: a run of the environment starts unapproved
    self_review_prevented: bool  # every rule has 'Prevent self-review' on


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
        """A call under this repository (``path`` starts after ``/repos/OWNER/NAME``)."""
        return self.request(method, f"/repos/{self.repository}{path}", body)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Any API path (``/orgs/...``); :class:`GitHubError` on an HTTP error (``status`` holds its code)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.api_url}{path}",
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
            raise GitHubError(f"{method} {path}: HTTP {exc.code} {detail}", status=exc.code) from None
        except urllib.error.URLError as exc:
            raise GitHubError(f"{method} {path}: {exc.reason}") from None
        return json.loads(raw) if raw else None

    def open_issues(self, label: str, author: str) -> list[Issue]:
        """The label's open issues (not pull requests) that ``author`` opened: anyone who can label an issue
        can copy a marker, so a caller edits only its own login's."""
        query = urllib.parse.urlencode({"state": "open", "labels": label})
        return [Issue(int(i["number"]), i.get("title") or "", i.get("body") or "")
                for i in self.pages(f"/issues?{query}", limit=50)
                if "pull_request" not in i and (i.get("user") or {}).get("login") == author]  # fmt: skip

    def create_issue(self, title: str, body: str, labels: list[str]) -> int:
        return int(self._call("POST", "/issues", {"title": title, "body": body, "labels": labels})["number"])

    def update_issue(self, number: int, title: str, body: str) -> None:
        self._call("PATCH", f"/issues/{number}", {"title": title, "body": body})

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/issues/{number}/comments", {"body": body})

    def close_issue(self, number: int) -> None:
        self._call("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": "completed"})

    # --- pull requests (the gate and the sticky comment) -----------------------------------------------

    def pages(self, path: str, *, key: str | None = None, limit: int = 20, whole: bool = False) -> list[Any]:
        """Every item of a paginated list under this repository (``key``: the list inside an object), at most
        ``limit`` pages of 100; ``whole``: a list longer than that is a :class:`GitHubError`, not its first items
        (the gate decides on a whole list or not at all: events beyond the cap could be the ones that matter)."""
        items: list[Any] = []
        total: int | None = None  # an object's total_count: a filtered /actions/runs stops at 1,000 silently
        sep = "&" if "?" in path else "?"
        for page in range(1, limit + 1):
            answer = self._call("GET", f"{path}{sep}per_page=100&page={page}")
            if key and isinstance(answer.get("total_count"), int):
                total = answer["total_count"] if total is None else total
            batch = answer.get(key, []) if key else answer
            items += batch
            if len(batch) < 100:
                break
        cut = len(items) < total if total is not None else len(items) >= limit * 100
        if whole and cut:
            raise GitHubError(f"GET {path}: {total or f'more than {limit * 100:,}'} items, {len(items):,} listed; "
                              "refusing to decide on part of them")
        return items

    def permission(self, login: str) -> str:
        """``login``'s permission on this repository: admin, write (maintain too), read or none."""
        try:
            answer = self._call("GET", f"/collaborators/{urllib.parse.quote(login, safe='')}/permission")
        except GitHubError as exc:
            if exc.status == 404:  # not a collaborator
                return "none"
            raise
        return str((answer or {}).get("permission") or "none")

    def comments(self, number: int) -> list[dict[str, Any]]:
        return self.pages(f"/issues/{number}/comments")

    def create_comment(self, number: int, body: str) -> dict[str, Any]:
        """The new comment as GitHub answers it (``id``, ``html_url``, ...)."""
        return dict(self._call("POST", f"/issues/{number}/comments", {"body": body}))

    def update_comment(self, comment_id: int, body: str) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/issues/comments/{comment_id}", {"body": body}))

    def create_status(self, sha: str, state: str, description: str, context: str, target_url: str) -> None:
        """Set a commit status; an empty ``target_url`` (outside a workflow run) sets none."""
        body = {"state": state, "description": description, "context": context}
        self._call("POST", f"/statuses/{sha}", {**body, "target_url": target_url} if target_url else body)

    def environment_reviewers(self, name: str) -> Reviewers | None:
        """The required reviewers of environment ``name``, None when it does not exist (GitHub would create it
        without protection the first time a job names it): the gate and ``scripts/check-repo-settings`` both
        judge a fork's environment by this."""
        try:
            environment = self._call("GET", f"/environments/{name}")
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        rules = [r for r in environment.get("protection_rules") or [] if r.get("type") == "required_reviewers"]
        return Reviewers(sum(len(r.get("reviewers") or []) for r in rules),
                         bool(rules) and all(r.get("prevent_self_review") for r in rules))  # fmt: skip

    def remove_label(self, number: int, label: str) -> None:
        self._call("DELETE", f"/issues/{number}/labels/{urllib.parse.quote(label, safe='')}")
