"""``python -m regressions.pr_render``: the pull request's comment and commit status, from data only.

The trusted half of the PR workflow runs this with the **default branch's** code over the ``report.json``
that the GPU job (which ran the pull request's code) uploaded. The file is validated against
:mod:`regressions.pr_schema`, each row judged again with this checkout's configuration (the default branch's
``pyproject.toml``/``mlaperf.toml``: its direction and threshold), then rendered by
:func:`regressions.report.compare_markdown`: the pull request can change its numbers, never the comment's
markup, and never the status's wording. Base and head come from the gate (the GitHub API), not from the file.

Writes the comment (``--comment-out``) and the status (``--status-out``, JSON: state, description,
context, and the comment's marker). Exit status: 0 written (whatever the state), 2 bad usage (an argument
that is not a full SHA).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from regressions.compare import FAILED, MISSING, REGRESSED, Comparison, fails_check
from regressions.config import ConfigError, load_settings
from regressions.pr_schema import ReportError, check_sha, read_report
from regressions.report import MARKER, MAX_BODY_CHARS, commit_link, compare_markdown, gh_text
from regressions.units import fmt_percent, plural
from settings.pr_contract import CONTEXT, FORK_CONTEXT, repository_url, run_url

FORK_NOTE = (
    "> **Figures from fork code, unverified.** This pull request comes from a fork: its own code ran the "
    "benchmarks and wrote these numbers. They are a hint for review, not evidence; see `docs/security.md`."
)
INVALID = "report data invalid: see the comment"  # the fixed status of a refused report.json
# needs.benchmark.result, as GitHub Actions reports it.
JOB_RESULTS = ("success", "failure", "cancelled", "skipped")
RUN_URL = re.compile(r"https://[\w.-]+/[\w.-]+/[\w.-]+/actions/runs/\d+")
MAX_DESCRIPTION = 140  # GitHub's limit for a status description


@dataclass
class Status:
    state: str  # success | failure | error
    description: str
    context: str


def threshold_note(comparisons: Sequence[Comparison]) -> str:
    """The thresholds the rows were judged with, as the report's summary line states them."""
    values = sorted({c.threshold for c in comparisons})
    if not values:
        return "no series compared"
    if len(values) == 1:
        return f"threshold {fmt_percent(values[0])}"
    return f"thresholds {fmt_percent(values[0])} to {fmt_percent(values[-1])} per benchmark"


def _with_fork_note(body: str, fork: bool) -> str:
    if not fork:
        return body
    first, _, rest = body.partition("\n")
    return f"{first}\n{FORK_NOTE}\n\n{rest}" if first == MARKER else f"{MARKER}\n{FORK_NOTE}\n\n{body}"


def render(
    comparisons: Sequence[Comparison] | None,
    *,
    base: str,
    head: str,
    fork: bool,
    job_result: str,
    run_url: str,
    problem: str | None = None,
    repo_url: str = "",
) -> tuple[str, Status]:
    """(comment, status) for validated comparisons, for a refused report (``problem``), or for none; the commits
    link to their pages under ``repo_url`` (``report.commit_link``)."""
    context = FORK_CONTEXT if fork else CONTEXT
    prefix = "fork code, unverified: " if fork else ""
    result = job_result if job_result in JOB_RESULTS else "unknown"
    link = f"[the run]({run_url})" if RUN_URL.fullmatch(run_url) else "the workflow run"
    problem = None if problem is None else gh_text(problem)
    commits = f"head {commit_link(head, repo_url)} against base {commit_link(base, repo_url)}"
    if problem is not None:
        body = (f"{MARKER}\n## mlaperf benchmarks: report refused\n\nThe benchmark job's `report.json` for {commits} "
                f"did not pass validation ({problem}), so nothing of it is shown. See {link}.\n")  # fmt: skip
        return _with_fork_note(body, fork), Status("error", prefix + INVALID, context)
    if comparisons is None:
        body = (f"{MARKER}\n## mlaperf benchmarks: no report\n\nThe benchmark job for {commits} ended ({result}) "
                f"without a report. See {link}.\n")  # fmt: skip
        return _with_fork_note(body, fork), Status("error", f"{prefix}benchmarks did not finish ({result})", context)
    machines = sorted({c.machine for c in comparisons})
    body = compare_markdown(comparisons, base=base, head=head, machines=machines,
                            threshold_note=threshold_note(comparisons), max_chars=MAX_BODY_CHARS - 1_000,
                            repo_url=repo_url)  # fmt: skip
    regressed = sum(c.status == REGRESSED for c in comparisons)
    failed = sum(c.status == FAILED for c in comparisons)
    missing = sum(c.status == MISSING for c in comparisons)
    if any(fails_check(c) for c in comparisons):
        gone = f", {missing} missing" if missing else ""
        status = Status("failure", f"{prefix}{plural(regressed, 'regression')}, {failed} failed{gone}", context)
    elif result != "success":  # a report, then the job failed (or was cancelled): not a clean run
        status = Status("error", f"{prefix}benchmark job ended ({result}) after its report", context)
        body += f"\nThe benchmark job ended ({result}) after writing this report. See {link}.\n"
    else:
        status = Status("success", f"{prefix}no regression ({len(comparisons)} series)", context)
    return _with_fork_note(body, fork), status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regressions.pr_render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--report", type=Path, required=True, metavar="FILE",
                        help="report.json of the benchmark job (may be missing: the job gave no report)")  # fmt: skip
    parser.add_argument("--base", required=True, help="base commit, full SHA (from the gate)")
    parser.add_argument("--head", required=True, help="head commit, full SHA (from the gate)")
    parser.add_argument("--fork", choices=("true", "false"), required=True, help="the head is in a fork")
    parser.add_argument("--job-result", required=True,
                        help="needs.benchmark.result (success, failure, cancelled, skipped)")
    parser.add_argument("--run-url", default=run_url(), help="link to the workflow run (default: this GitHub Actions "
                        "run's page, from GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID)")  # fmt: skip
    parser.add_argument("--repo-url", default=repository_url(), help="the repository's page, where the commits link to "
                        "(default: this GitHub Actions run's, from GITHUB_SERVER_URL and GITHUB_REPOSITORY; none "
                        "outside one)")  # fmt: skip
    parser.add_argument("--comment-out", type=Path, required=True, metavar="FILE", help="where the comment goes")
    parser.add_argument("--status-out", type=Path, required=True, metavar="FILE", help="where the status goes")
    args = parser.parse_args(argv)
    try:
        base, head = check_sha(args.base, "--base"), check_sha(args.head, "--head")
    except ReportError as exc:
        print(f"pr_render: error: {exc}", file=sys.stderr)
        return 2
    comparisons: list[Comparison] | None = None
    problem = None
    if args.report.exists() or args.report.is_symlink():
        try:
            comparisons = read_report(args.report, load_settings())  # this checkout's: the default branch's
        except (ReportError, ConfigError, OSError) as exc:
            problem = str(exc) if isinstance(exc, ReportError) else "unreadable" if isinstance(exc, OSError) else (
                "the default branch's configuration is invalid")
    body, status = render(comparisons, base=base, head=head, fork=args.fork == "true", job_result=args.job_result,
                          run_url=args.run_url, problem=problem, repo_url=args.repo_url)  # fmt: skip
    status.description = status.description[:MAX_DESCRIPTION]
    args.comment_out.write_text(body, encoding="utf-8")
    # The marker travels with the status: the poster (standard library only) finds its sticky comment by it.
    args.status_out.write_text(json.dumps({**asdict(status), "marker": MARKER}) + "\n", encoding="utf-8")
    print(f"pr_render: {status.state} ({status.description}); comment {len(body):,} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
