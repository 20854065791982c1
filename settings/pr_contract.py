"""Names the pull-request workflow's jobs share: the render (``regressions.pr_render``) and the gate and
poster (``mlaperf.pr_gate``, ``mlaperf.pr_post``). Standard library only: the GitHub-hosted jobs that hold a
write token check out ``mlaperf/`` and ``settings/`` and import this without installing anything.

The status contexts: a same-repository pull request reports under ``CONTEXT``; a fork's figures come from
the fork's own code, so they report under ``FORK_CONTEXT`` and can never satisfy a check required on
``CONTEXT``.
"""

from __future__ import annotations

import re

CONTEXT = "mlaperf benchmarks"
FORK_CONTEXT = "mlaperf benchmarks (fork, unverified)"
STATES = ("pending", "success", "failure", "error")
LABEL = "run-benchmarks"
FORK_ENVIRONMENT = "gpu-benchmarks-fork"
SAME_ENVIRONMENT = "gpu-benchmarks"
STORE_ENVIRONMENT = "mlaperf-store"  # holds the secret MLAPERF_DB, deployable from the default branch only
BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN writes as: the sticky comment is this login's only
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
