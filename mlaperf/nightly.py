"""``mlaperf nightly plan|alert``: the two decisions of the nightly service (scripts/nightly.sh runs them;
``machine`` prints the asv machine name both go by).

``plan`` picks the commits of one round of a night, within the night's commit budget, in this order:

1. confirmation: a commit whose step is ``suspect`` (seen in one run only) is measured once more, so the
   detector can call it ``new`` (confirmed) or ``transient`` before anyone is alerted;
2. the culprit: where a flagged step (suspect, new, acknowledged) sits after unmeasured first-parent
   commits, the middle one of that gap is measured (a bisection over nights finds the commit, not a guess);
3. the backlog: commits of the recent first-parent history not measured yet, newest first.

"Measured" is read from the store (commit x machine x benchmark version, ``mlaperf.measured``), never from
result files, which a CI checkout deletes. Round 1 keeps ``--reserve`` commits of the budget for round 2,
which runs after ingest and detection, so tonight's suspects are confirmed tonight.

``alert`` turns confirmed alert groups into GitHub issues: one issue per group (opened when the group is
``new``), its body updated on later nights, closed with a comment when no series of the group is open
any more (fixed, transient, ignored or retired). Only issues the workflow's own login opened
(``MLAPERF_BOT_LOGIN``, default ``github-actions[bot]``, as the PR poster) are ever edited or closed. The
plan is written to a JSON file before it is applied; ``--dry-run`` needs no token (open issues unknown).

Both read the regression records of ``mlaperf detect --json --all`` (keys: id, group, machine_wide, status,
machine, benchmark, params, commit, parent, ratio, new; more are tolerated).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mlaperf.nightly_failing import plan_failing
from mlaperf.nightly_groups import plan_issues
from mlaperf.run_commits import NEW_WINDOW
from regressions.store import OPEN_STATUSES  # the detector's rule: listed by default, keep an issue open
from regressions.units import plural
from settings import env, exits
from settings.args import DefaultsFormatter, add_asv_machine, add_bench, add_db, add_tier
from settings.pr_contract import repository_url, run_url

ISSUE_LABEL = "mlaperf-regression"


class PlanError(exits.BadInput):
    """Bad input of a nightly step (file, argument); exit status 2."""


# --- inputs ---------------------------------------------------------------------------------------


def read_document(path: Path | None) -> Any:
    """The parsed ``mlaperf detect --json --all`` file (none given: None), read once for the records and the failing
    list. A file named but missing is an error, not "no regressions": a typo or a failed detect must not plan nights
    blind or close the issues."""
    if path is None:
        return None
    if not path.is_file():
        raise PlanError(f"--regressions {path}: no such file (write it with `mlaperf detect --json --all`)")
    try:
        return json.loads(path.read_text() or "[]")
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanError(f"--regressions {path}: not the JSON of `mlaperf detect --json` ({exc})") from None


def load_records(path: Path | None, doc: Any = None) -> list[dict[str, Any]]:
    """Regression records of ``mlaperf detect --json --all`` at ``path`` (none given: an empty list), each checked;
    ``doc``: the file already read by :func:`read_document`."""
    data = read_document(path) if doc is None else doc
    if data is None:
        return []
    if isinstance(data, dict):  # the versioned document (docs/detection.md); a bare list is the older shape
        data = data.get("regressions")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise PlanError(f"--regressions {path}: expected a JSON list of regression records")
    for r in data:
        missing = {"status", "machine", "commit"} - set(r)
        if missing:
            raise PlanError(f"--regressions {path}: a record lacks {', '.join(sorted(missing))}")
        for key in ("ratio", "now_ratio", "before", "after", "p_value"):  # numbers the issue's text is made of
            value = r.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise PlanError(f"--regressions {path}: record {r.get('id', '?')}: {key} {value!r} is not a number")
        labels = r.get("labels")
        if labels is not None and not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
            raise PlanError(f"--regressions {path}: record {r.get('id', '?')}: labels {labels!r} is not a list of "
                            "strings")
    return data


@dataclass
class NightState:
    """What this night has planned so far (rounds share the budget)."""

    budget: int
    planned: list[dict[str, str]] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)  # the suite's benchmark versions, discovered once a night

    @classmethod
    def load(cls, path: Path, budget: int) -> NightState:
        if not path.exists():
            return cls(budget)
        try:
            data = json.loads(path.read_text())
            return cls(int(data["budget"]), list(data["planned"]), dict(data.get("cache") or {}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PlanError(f"--state {path}: unreadable ({exc})") from None

    def save(self, path: Path) -> None:
        """Rewrite the state in place (a full disk may still take it in the blocks it frees); a write that fails
        puts the previous state back, or removes a state that did not exist, and raises."""
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_bytes() if path.exists() else None
        try:
            path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        except OSError:
            with contextlib.suppress(OSError):
                if before is None:
                    path.unlink()
                else:
                    path.write_bytes(before)
            raise

    @property
    def left(self) -> int:
        return max(self.budget - len(self.planned), 0)


def on_default_branch(root: Path, shas: Iterable[str]) -> set[str]:
    """The commits among ``shas`` that are ancestors of HEAD (the nightly checks out the default branch):
    only those are measured again; a suspect step of a branch or a pull request is not the nightly's."""
    found = set()
    for sha in set(shas):
        proc = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "HEAD"], cwd=root, capture_output=True)
        if proc.returncode == 0:
            found.add(sha)
    return found


def first_parent(root: Path, *args: str) -> list[str]:
    proc = subprocess.run(["git", "rev-list", "--first-parent", *args, "--"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PlanError(f"git rev-list {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.split()


# --- the plan -------------------------------------------------------------------------------------


@dataclass
class Pick:
    sha: str
    reason: str


def plan_round(
    window: Sequence[str],
    runs: Mapping[str, int],
    records: Iterable[Mapping[str, Any]],
    gaps: Mapping[str, Sequence[str]],
    *,
    budget_left: int,
    tonight: Iterable[str] = (),
) -> list[Pick]:
    """The commits of one round, in run order.

    ``window``: recent first-parent commits, newest first. ``runs``: {sha: runs in the store covering the
    current suite}. ``records``: this machine's regression records. ``gaps``: {flagged sha: the first-parent
    commits between its ``parent`` and it, oldest first}. ``tonight``: shas already measured tonight; only a
    confirmation picks one of them again (round 2 confirms a suspect that round 1 measured).
    """
    measured_tonight = set(tonight)
    picked: set[str] = set()
    picks: list[Pick] = []

    def take(sha: str, reason: str, *, confirm: bool = False) -> None:
        if len(picks) < budget_left and sha not in picked and (confirm or sha not in measured_tonight):
            picks.append(Pick(sha, reason))
            picked.add(sha)

    records = list(records)
    for r in records:  # 1. confirm suspects: one more run of that commit (runs < 2: never a third)
        if r["status"] == "suspect" and runs.get(r["commit"], 0) < 2:
            take(r["commit"], f"confirm suspect step (group {r.get('group', '?')})", confirm=True)
    for r in records:  # 2. narrow the gap before a flagged step
        if r["status"] in OPEN_STATUSES:
            done = picked | measured_tonight
            unmeasured = [s for s in gaps.get(r["commit"], ()) if not runs.get(s) and s not in done]
            if unmeasured:
                take(unmeasured[len(unmeasured) // 2], f"bisect the gap before the step at {r['commit'][:10]}")
    for sha in window:  # 3. the backlog, newest first
        if not runs.get(sha):
            take(sha, "not measured yet")
    return picks


def write_plan(out: Path, picks: Sequence[Pick], state: NightState, state_path: Path) -> None:
    """The plan file, then the state that counts its commits against the budget: where either write fails (a full
    disk), the plan file is removed (a plan of an earlier round there too: it was being overwritten) and the state
    is as it was, so a run after making room plans the same round again instead of skipping commits that a lost
    plan file never ran."""
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        out.write_text("".join(f"{p.sha}\n" for p in picks))
        state.save(state_path)
    except OSError:
        with contextlib.suppress(OSError):
            out.unlink(missing_ok=True)
        raise


def night_target(args: argparse.Namespace) -> tuple[str, str]:
    """(tier, asv machine name) of tonight's results (``--tier``, ``--machine``): what the plan reads and the record
    step accepts. A named tier is taken as named: the plan and record jobs may run on a store runner without the
    GPU (only ``auto`` looks for a device; ``--tier gpu`` there stopped the plan: "torch sees no CUDA device")."""
    from mlaperf import runner

    tier = runner.resolve_tier(args.tier) if args.tier == "auto" else args.tier
    return tier, runner.machine_name(args.machine, tier)


def cmd_machine(args: argparse.Namespace) -> int:
    print(night_target(args)[1])
    return exits.OK


def cmd_plan(args: argparse.Namespace) -> int:
    from mlaperf import runner

    if args.budget < 0 or args.reserve < 0 or args.window < 1:
        raise PlanError("--budget and --reserve must be 0 or more, --window 1 or more")
    if args.round not in (1, 2):
        raise PlanError(f"--round {args.round}: 1 or 2")
    root = runner.repo_root()
    tier, machine = night_target(args)
    state = NightState.load(args.state, args.budget)
    records = [r for r in load_records(args.regressions) if r["machine"] == machine]
    window = first_parent(root, f"--max-count={args.window}", "HEAD")
    ours = on_default_branch(root, (r["commit"] for r in records))
    records = [r for r in records if r["commit"] in ours]

    gaps: dict[str, list[str]] = {}
    for r in records:
        parent = r.get("parent")
        if r["status"] in OPEN_STATUSES and parent and r["commit"] not in gaps:
            try:
                between = first_parent(root, "--reverse", f"{parent}..{r['commit']}")
            except PlanError:  # a commit this clone does not have: no gap to fill
                continue
            gaps[r["commit"]] = [s for s in between if s != r["commit"]]

    candidates = list(dict.fromkeys([*window, *(r["commit"] for r in records), *(s for g in gaps.values() for s in g)]))
    runs: dict[str, int] = {}
    url = runner.store_to_ask(args.db)
    if url:
        conf = runner.load_config((root / "asv.conf.json").resolve(), hint="nightly plan reads the repository root's")
        runner.resolve_paths(conf, root)
        commits = [runner.Commit(sha, "") for sha in reversed(candidates)]
        child = runner.benchmark_env(root, tier, None)  # listing the suite: benchmark code, no store URL
        runs = runner.measured_in_store(url, conf, commits, machine, child, args.bench, cache=state.cache)

    reserve = min(args.reserve, max(state.budget - 1, 0)) if args.round == 1 else 0
    left = max(state.left - reserve, 0)
    picks = plan_round(window, runs, records, gaps, budget_left=left, tonight=(p["sha"] for p in state.planned))
    state.planned += [{"sha": p.sha, "reason": p.reason, "round": str(args.round)} for p in picks]
    write_plan(args.out, picks, state, args.state)
    unmeasured = sum(1 for s in window if not runs.get(s))
    print(f"nightly plan, round {args.round}: {plural(len(picks), 'commit')} on machine {machine!r} "
          f"(budget {state.budget}, {state.left} left after this round; {unmeasured} of the last "
          f"{len(window)} commits not measured before tonight)")  # fmt: skip
    for p in picks:
        print(f"  {p.sha[:10]}  {p.reason}")
    open_records = [r for r in records if r["status"] in OPEN_STATUSES]
    if open_records:
        from regressions.report import detect_table

        print(f"open regressions on {machine}:\n{detect_table(open_records)}")
    return exits.OK


# --- alerts ---------------------------------------------------------------------------------------


def _links(args: argparse.Namespace) -> dict[str, str]:
    """The issues' links. Commit links: ``--repo-url``, else ``MLAPERF_REPO_URL``, else this GitHub repository;
    an empty one, given or set, means no commit links (as everywhere ``MLAPERF_REPO_URL`` is read)."""
    chosen = args.repo_url.strip().rstrip("/") if args.repo_url is not None else env.repo_url()
    return {
        "repo_url": repository_url() if chosen is None else chosen,
        "dashboard_url": args.dashboard_url or env.dashboard_url(),
        "run_url": run_url(),
    }


def cmd_alert(args: argparse.Namespace) -> int:
    from mlaperf.github import GitHub, GitHubError

    if args.max_age < 0:
        raise PlanError(f"--max-age {args.max_age}: 0 (any age) or more days")
    doc = read_document(args.regressions)
    records = load_records(args.regressions, doc)  # the file is checked before any token
    if args.dry_run and not os.environ.get("GITHUB_TOKEN"):
        print("nightly alert: --dry-run without GITHUB_TOKEN: open issues unknown, every new group planned as open")
        client = None
    else:
        try:
            client = GitHub.from_env()
        except ValueError as exc:
            raise PlanError(str(exc)) from None
    try:
        issues = client.open_issues(ISSUE_LABEL, env.bot_login()) if client else []
        cutoff = (datetime.now(UTC).replace(tzinfo=None) - timedelta(days=args.max_age)
                  if args.max_age else None)  # fmt: skip
        actions = [*plan_issues(records, issues, _links(args), cutoff), *plan_failing(doc, issues, _links(args))]
        args.plan_out.parent.mkdir(parents=True, exist_ok=True)
        args.plan_out.write_text(json.dumps([asdict(a) for a in actions], indent=2) + "\n")
        counts = {k: sum(a.action == k for a in actions)
                  for k in ("open", "update", "close", "unchanged", "not_opened")}  # fmt: skip
        line = "nightly alert: " + ", ".join(f"{v} {k}" for k, v in counts.items())
        print(f"{line} (plan in {args.plan_out})")
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as summary:
                summary.write(f"### {line}\n\n" + "".join(
                    f"- not opened ({a.comment}): {a.title}\n" if a.action == "not_opened"
                    else f"- {a.action} issue #{a.number or 'new'}: {a.title}\n"
                    for a in actions if a.action != "unchanged"))  # fmt: skip
        if args.dry_run or client is None:
            return exits.OK
        for a in actions:
            if a.action == "open":
                a.number = client.create_issue(a.title, a.body, [ISSUE_LABEL])
            elif a.action == "update":
                client.update_issue(int(a.number or 0), a.title, a.body)
            elif a.action == "close":
                client.comment(int(a.number or 0), a.comment)
                client.close_issue(int(a.number or 0))
            if a.action in ("open", "update", "close"):
                print(f"  {a.action} issue #{a.number} (alert group {a.group})")
    except GitHubError as exc:
        print(f"mlaperf nightly alert: GitHub API: {exc}", file=sys.stderr)
        return exits.INTERNAL
    return exits.FOUND if counts["open"] else exits.OK  # a regression was confirmed tonight


# --- command line ---------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "nightly",
        help="the nightly service's decisions: which commits to measure tonight, which issues to open/close",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="nightly_command", metavar="STEP", required=True)
    plan_help = "pick tonight's commits (confirmations, gaps, newest first) within the budget"
    p = sub.add_parser("plan", help=plan_help, formatter_class=DefaultsFormatter,
                       description=f"{plan_help[0].upper()}{plan_help[1:]}: one round's commits go to --out, one sha a "
                       "line. Exit status: 0 planned (none is fine), 2 bad usage or input.")  # fmt: skip
    p.add_argument("--regressions", type=Path, default=None, metavar="FILE",
                   help="JSON of `mlaperf detect --json --all` (not given: no regressions known)")  # fmt: skip
    p.add_argument("--state", type=Path, default=Path("artifacts/nightly/state.json"), metavar="FILE",
                   help="this night's planned commits, shared by its rounds (fresh each night)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("artifacts/nightly/plan.txt"), metavar="FILE",
                   help="where the round's commits go, one sha a line, in run order")  # fmt: skip
    # A string default: argparse converts it only when `nightly plan` runs, so a bad env value is its usage error.
    p.add_argument("--budget", type=int, default=env.night_budget(),
                   help=f"commits measured per night, all rounds together (env {env.NIGHT_BUDGET.name})")  # fmt: skip
    p.add_argument("--reserve", type=int, default=2, help="commits round 1 leaves for round 2's confirmations")
    p.add_argument("--round", type=int, default=1, help="1: before any run tonight; 2: after ingest + detect")
    p.add_argument("--window", type=int, default=NEW_WINDOW, help="recent first-parent commits considered")
    add_asv_machine(p)
    add_tier(p)
    add_bench(p)
    add_db(p)
    p.set_defaults(func=cmd_plan)

    machine_help = "print the asv machine name tonight's results are stored under (--machine, --tier)"
    m = sub.add_parser("machine", help=machine_help, formatter_class=DefaultsFormatter,
                       description=f"{machine_help[0].upper()}{machine_help[1:]}: the name the plan reads and the "
                       "record step accepts (scripts/nightly.sh). Exit status: 0 printed, 2 bad usage.")  # fmt: skip
    add_asv_machine(m)
    add_tier(m)
    m.set_defaults(func=cmd_machine)

    alert_help = "open, update and close one GitHub issue per confirmed alert group"
    a = sub.add_parser("alert", help=alert_help, formatter_class=DefaultsFormatter,
                       description=f"{alert_help[0].upper()}{alert_help[1:]} (only the bot's own issues, label "
                       f"{ISSUE_LABEL}); --dry-run writes the plan without calling GitHub. Exit status: 0 nothing "
                       "opened, 1 an issue was opened, 2 bad usage or input, 3 a GitHub API error.")  # fmt: skip
    a.add_argument("--regressions", type=Path, required=True, metavar="FILE",
                   help="JSON of `mlaperf detect --json --all`")  # fmt: skip
    a.add_argument("--plan-out", type=Path, default=Path("artifacts/nightly/issues-plan.json"), metavar="FILE",
                   help="the open/update/close plan, written before it is applied")  # fmt: skip
    a.add_argument("--dashboard-url", default=None, help=f"dashboard link in issues (env {env.DASHBOARD_URL.name})")
    a.add_argument("--repo-url", default=None, metavar="URL",
                   help=f"repository web URL of commit links, '' for none (default: ${env.REPO_URL.name}, else the "
                   "GitHub repository of the workflow run)")  # fmt: skip
    a.add_argument("--dry-run", action="store_true", help="write the plan, change no issue")
    a.add_argument("--max-age", type=int, default=0, metavar="DAYS",
                   help="open no issue for a group whose commits are all dated more than DAYS ago (asv's date: the "
                   "author's), e.g. 30 on the night after a history is imported, which finds every old step; 0: "
                   "any age")  # fmt: skip
    a.set_defaults(func=cmd_alert)

