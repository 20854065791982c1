"""Names the pull-request workflow's jobs share: the render (``regressions.pr_render``) and the gate and
poster (``mlaperf.pr_gate``, ``mlaperf.pr_post``), and the links of a workflow run that they and the nightly's
issues write (:func:`run_url`). Standard library only: the GitHub-hosted jobs that hold a write token check out
``mlaperf/`` and ``settings/`` and import this without installing anything.

The status contexts: a same-repository pull request reports under ``CONTEXT``; a fork's figures come from
the fork's own code, so they report under ``FORK_CONTEXT`` and can never satisfy a check required on
``CONTEXT``.
"""

from __future__ import annotations

import os
import re

from settings.env import DEFAULT_BOT_LOGIN

CONTEXT = "mlaperf benchmarks"
FORK_CONTEXT = "mlaperf benchmarks (fork, unverified)"
STATES = ("pending", "success", "failure", "error")
LABEL = "run-benchmarks"
FORK_ENVIRONMENT = "gpu-benchmarks-fork"
SAME_ENVIRONMENT = "gpu-benchmarks"
STORE_ENVIRONMENT = "mlaperf-store"  # holds the secret MLAPERF_DB, deployable from the default branch only
BOT_LOGIN = DEFAULT_BOT_LOGIN  # who GITHUB_TOKEN writes as: the sticky comment is this login's only
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
RENDER_JOB = "Validate and render (GitHub-hosted, default branch)"  # pr-benchmarks.yml's render job, by name
# The render job's sha256 of comment.md and status.json (its job outputs), as the post job's environment holds them:
# the poster posts those bytes only, since the job that ran the pull request's code may reach the artifact store.
COMMENT_DIGEST_ENV, STATUS_DIGEST_ENV = "COMMENT_SHA256", "STATUS_SHA256"
RUNNER_IMAGE = "mlaperf-runner"  # the PR job's container image (docker/Dockerfile), pushed by runner-image.yml


def runner_image(repository: str, sha: str) -> str:
    """The PR job's container image built from commit ``sha`` of ``repository`` (owner/name). GHCR takes lower
    case only and GitHub's owner and repository names may have capitals."""
    return f"ghcr.io/{repository.lower()}/{RUNNER_IMAGE}:{sha}"


def repository_url() -> str:
    """The repository's web page inside a GitHub Actions job (``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY``),
    "" outside one."""
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    server = (os.environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
    return f"{server}/{repository}" if repository else ""


def run_url() -> str:
    """This workflow run's page (``GITHUB_RUN_ID``), what statuses, comments and issues link to; "" outside a
    workflow run, so no link points at a run that does not exist."""
    repository, run_id = repository_url(), os.environ.get("GITHUB_RUN_ID", "")
    return f"{repository}/actions/runs/{run_id}" if repository and run_id else ""
