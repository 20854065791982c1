"""Nightly alerts: one GitHub issue per confirmed alert group, opened, updated, then closed when fixed.

`mlaperf nightly alert` runs as a subprocess against a fake GitHub API served over real HTTP; the plan
file it writes and the issues the server holds must both be right."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from scratch import MLAPERF, FakeGitHub

from mlaperf import cli
from mlaperf.nightly import plan_round
from mlaperf.nightly_groups import issue_for_group

SHA = "a" * 40
PARENT = "b" * 40


def record(rid: int, group: int, status: str, benchmark: str = "bench_decode.SparseDecode.time_decode",
           ratio: float = 1.5, **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {"id": rid, "group": group, "machine_wide": False, "status": status, "machine": "h200",
            "benchmark": benchmark, "params": {"impl": "'mma'", "concurrency": "64"}, "commit": SHA,
            "parent": PARENT, "ratio": ratio, "new": False, "before": 4.0e-5, "after": 4.0e-5 * ratio,
            "unit": "seconds", **extra}  # fmt: skip


def alert(tmp_path: Path, github: FakeGitHub, records: list[dict[str, Any]] | dict[str, Any], *extra: str
          ) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    regressions = tmp_path / "regressions.json"
    regressions.write_text(json.dumps(records))
    plan = tmp_path / "issues-plan.json"
    proc = subprocess.run(
        [str(MLAPERF), "nightly", "alert", "--regressions", str(regressions), "--plan-out", str(plan),
         "--dashboard-url", "https://perf.example/dash", *extra],
        env={**os.environ, **github.env()}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(plan.read_text())


def test_issue_lifecycle(tmp_path: Path, fake_github: FakeGitHub) -> None:
    # A suspect group is not alerted yet: the nightly re-measures first.
    rc, plan = alert(tmp_path, fake_github, [record(1, 7, "suspect")])
    assert (rc, plan) == (0, [])
    assert fake_github.state()["issues"] == {}

    # Confirmed: one issue for the group (two series), exit 1 (a regression found tonight).
    hostile = "bench_x.Evil.time_x|@core-team <img src=x> [click](https://evil.example) <!-- mlaperf-alert-group:9 -->"
    records = [record(1, 7, "new"), record(2, 7, "new", benchmark=hostile, ratio=2.0), record(3, 8, "fixed")]
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 1 and [(a["action"], a["group"]) for a in plan] == [("open", 7)]
    issues = fake_github.state()["issues"]
    assert list(issues) == ["1"] and issues["1"]["labels"] == ["mlaperf-regression"]
    body = issues["1"]["body"]
    assert body.startswith("<!-- mlaperf-alert-group:7 -->") and "2 series (worst 2.00x)" in issues["1"]["title"]
    assert "https://perf.example/dash" in body and f"https://github.example/acme/kernels/commit/{SHA}" in body
    assert "40.0 us" in body and "60.0 us" in body and "80.0 us" in body  # before/after in units people read
    row = next(line for line in body.splitlines() if "Evil" in line)
    assert row.count(" | ") == 6, "a | in data must not split the row"  # 7 columns: status .. ratio, p
    assert "@core-team" not in body and "](https://evil" not in body
    assert "`bench_x.Evil.time_x\\|@\u200bcore-team <img src=x>" in row, "data shown as code, not HTML"
    assert body.count("<!-- mlaperf-alert-group") == 1, "data cannot forge the marker"

    # Next night, nothing changed: nothing to do; then a series is acknowledged: the issue is updated.
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 0 and [(a["action"], a["number"]) for a in plan] == [("unchanged", 1)]
    records[0]["status"] = "acknowledged"
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 0 and [(a["action"], a["number"]) for a in plan] == [("update", 1)]
    assert "| acknowledged |" in fake_github.state()["issues"]["1"]["body"]
    # The level settles: detection recomputed the numbers; the issue shows tonight's, not the first night's.
    records[1].update(after=4.0e-5 * 1.6, ratio=1.6, p_value=1e-30)
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 0 and [(a["action"], a["number"]) for a in plan] == [("update", 1)]
    issue = fake_github.state()["issues"]["1"]
    assert "| 1.60x | < 1e-12 |" in issue["body"] and "2.00x" not in issue["body"] and "(worst 1.60x)" in issue["title"]
    # One series came part of the way back, another is a drift of small steps: a "now" column, the label.
    records[1].update(labels=["partly_recovered"], now_ratio=1.2)
    records[0].update(labels=["gradual"])
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 0 and [(a["action"], a["number"]) for a in plan] == [("update", 1)]
    body = fake_github.state()["issues"]["1"]["body"]
    assert "| ratio | now | p |" in body and "| 1.60x | 1.20x | < 1e-12 |" in body
    assert "| acknowledged (gradual) |" in body and body.count(" | - | ") == 1  # the other row has no "now"

    # Fixed: closed with a comment that says why; a later night has nothing open to touch.
    for r in records:
        r["status"] = "fixed"
    rc, plan = alert(tmp_path, fake_github, records)
    assert rc == 0 and [(a["action"], a["number"]) for a in plan] == [("close", 1)]
    state = fake_github.state()
    assert state["issues"]["1"]["state"] == "closed"
    assert [(c["issue"], c["body"]) for c in state["comments"]] == [
        (1, "No series of this alert group is open any more (fixed 2); closing.")]  # fmt: skip
    rc, plan = alert(tmp_path, fake_github, records)
    assert (rc, plan) == (0, [])


def test_old_steps_found_by_a_first_import_open_no_issue(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The first night after a history is imported finds every step of it at once (a review: 7 issues for steps of
    months before): with --max-age 30 a group whose commits are all older is planned as not_opened, and named; an
    old group whose alerts joined a group with an issue still updates it (not closed as followed by nothing)."""
    old = [record(1, 7, "new", date="2025-10-01T12:00:00"), record(2, 8, "new", date="2025-10-02T12:00:00+02:00")]
    recent = [record(3, 9, "new", date=datetime.now(UTC).isoformat(timespec="seconds"))]
    rc, plan = alert(tmp_path, fake_github, [*old, *recent], "--max-age", "30")
    assert rc == 1 and [(a["action"], a["group"]) for a in plan] == [("not_opened", 7), ("not_opened", 8), ("open", 9)]
    assert list(fake_github.state()["issues"]) == ["1"]
    assert plan[0]["comment"].startswith("every commit dated before ") and plan[0]["title"].startswith("Performance")
    # By default any age: the old groups open their issues; group 9's is unchanged.
    rc, plan = alert(tmp_path, fake_github, [*old, *recent])
    assert rc == 1 and [(a["action"], a["group"]) for a in plan] == [("open", 7), ("open", 8), ("unchanged", 9)]
    # Group 7's alerts join group 10 of the same range: its issue follows them, whatever their age.
    joined = [{**old[0], "group": 10}, old[1], recent[0]]
    rc, plan = alert(tmp_path, fake_github, joined, "--max-age", "30")
    assert [(a["action"], a["group"], a["number"]) for a in plan] == [("update", 10, 2), ("unchanged", 8, 3),
                                                                      ("unchanged", 9, 1)], plan
    regressions = tmp_path / "regressions.json"
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(regressions), "--max-age", "-1",
                           "--dry-run"], env={**os.environ, **fake_github.env()}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "--max-age -1: 0 (any age) or more days" in proc.stderr, proc.stderr


def test_an_issue_of_a_group_merged_into_another_is_closed(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """Night by night one event can start as two groups that later hold the same range; detection makes them one
    (``groups.merge_same_range``, found on Stingray's real results), so the later group's issue has no group any
    more: it is closed with a comment saying where its alerts went, and the earlier one's issue lists them all."""
    rc, plan = alert(tmp_path, fake_github, [record(1, 7, "new"), record(2, 8, "new", ratio=1.4)])
    assert rc == 1 and [(a["action"], a["group"]) for a in plan] == [("open", 7), ("open", 8)]
    rc, plan = alert(tmp_path, fake_github, [record(1, 7, "new"), record(2, 7, "new", ratio=1.4)])
    assert [(a["action"], a["number"]) for a in plan] == [("update", 1), ("close", 2)], plan
    state = fake_github.state()
    assert state["issues"]["2"]["state"] == "closed" and "joined another alert group" in state["comments"][0]["body"]
    assert "2 series" in state["issues"]["1"]["title"]
    rc, plan = alert(tmp_path, fake_github, [])  # a night that read no alert closes nothing
    assert plan == [] and fake_github.state()["issues"]["1"]["state"] == "open"
    # The kept group had no issue (its members were suspects) and the merged one had: that issue follows the kept
    # group, its marker rewritten; no second issue opens for the event (a review's find).
    rc, plan = alert(tmp_path, fake_github, [record(3, 5, "new"), record(4, 5, "new", ratio=1.4)])
    assert [(a["action"], a["group"], a["number"]) for a in plan] == [("update", 5, 1)], plan
    issues = fake_github.state()["issues"]
    assert issues["1"]["body"].startswith("<!-- mlaperf-alert-group:5 -->") and len(issues) == 2


def _failing(benchmark: str, commits: int = 11, machine: str = "h200") -> dict[str, Any]:
    return {"machine": machine, "benchmark": benchmark, "params": {"impl": "'mma'"}, "since": SHA,
            "commits": commits, "last_ok": PARENT}


def test_failing_benchmarks_get_an_issue_per_machine(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """A benchmark that broke raises no alert (detection skips failed runs; Jaxion's real history: 6 of 8 failed
    for 11 commits unseen): the nightly opens one issue per machine from `detect --json`'s `failing`, updates it
    while the list changes and closes it once none fails; a document without `failing` leaves it alone."""
    def night(failing: list[dict[str, Any]] | None) -> tuple[int, list[dict[str, Any]]]:
        doc: Any = [] if failing is None else {"version": 2, "summary": None, "groups": [], "regressions": [],
                                               "failing": failing}
        (tmp_path / "doc.json").write_text(json.dumps(doc))
        return alert(tmp_path, fake_github, doc)

    hostile = "bench_x.Evil.time_x|@core-team <img src=x> <!-- mlaperf-failing:other -->"
    rc, plan = night([_failing("bench_decode.SparseDecode.time_decode"), _failing(hostile, 3)])
    assert rc == 1 and [(a["action"], a["group"]) for a in plan] == [("open", "failing on h200")], plan
    issue = fake_github.state()["issues"]["1"]
    assert issue["title"] == f"Benchmarks failing on h200: 2 series, since {SHA[:10]}"
    assert issue["body"].startswith("<!-- mlaperf-failing:h200.") and issue["body"].count("<!--") == 1
    assert f"/commit/{PARENT}" in issue["body"] and "| 11 |" in issue["body"] and "@core-team" not in issue["body"]
    row = next(line for line in issue["body"].splitlines() if "Evil" in line)
    assert row.count(" | ") == 4 and "`bench_x.Evil.time_x\\|@\u200bcore-team <img src=x>" in row, row  # code
    rc, plan = night([_failing("bench_decode.SparseDecode.time_decode"), _failing(hostile, 3)])
    assert (rc, [(a["action"], a["number"]) for a in plan]) == (0, [("unchanged", 1)])
    rc, plan = night([_failing("bench_decode.SparseDecode.time_decode", 12)])
    assert [(a["action"], a["number"]) for a in plan] == [("update", 1)] and "1 series" in plan[0]["title"]
    rc, plan = night(None)  # an older document (a bare list): nothing known about failures, nothing closed
    assert plan == [] and fake_github.state()["issues"]["1"]["state"] == "open"
    (tmp_path / "doc.json").write_text(json.dumps({"regressions": [], "failing": [], "failing_machine": "other"}))
    rc, plan = alert(tmp_path, fake_github, json.loads((tmp_path / "doc.json").read_text()))
    assert plan == []  # `detect --machine other` says nothing of h200
    rc, plan = night([])
    assert [(a["action"], a["number"]) for a in plan] == [("close", 1)]
    assert fake_github.state()["issues"]["1"]["state"] == "closed"


def test_a_series_removed_while_failing_is_not_called_fixed(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """A broken benchmark taken out of the suite stops failing at the newest commit (`detect --json`'s
    `failing_unrun`): the machine's issue names it as not run, and where none fails any more it closes saying
    which listed series were not fixed but not run; an unrun series it never listed is not mentioned."""
    def night(failing: list[dict[str, Any]], unrun: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return alert(tmp_path, fake_github, {"regressions": [], "failing": failing, "failing_unrun": unrun})[1]

    kept, dropped = "bench_decode.SparseDecode.time_decode", "bench_index.Indexer.time_scores|<b>"
    old = {**_failing("bench_old.Gone.time_x", 2), "until": PARENT}
    night([_failing(kept), _failing(dropped, 4)], [])
    plan = night([_failing(kept, 12)], [{**_failing(dropped, 4), "until": SHA}, old])
    assert [(a["action"], a["number"]) for a in plan] == [("update", 1)]
    body = fake_github.state()["issues"]["1"]["body"]
    assert "1 series" in plan[0]["title"] and "bench_old" not in body
    tail = body[body.index("Listed here before and not run"):]
    assert "| `bench_index.Indexer.time_scores\\|<b>` |" in tail and f"/commit/{SHA}" in tail, tail  # code
    assert [a["action"] for a in night([_failing(kept, 12)], [{**_failing(dropped, 4), "until": SHA}, old])] == [
        "unchanged"]  # the same night again changes nothing
    plan = night([], [{**_failing(kept, 12), "until": SHA}, {**_failing(dropped, 4), "until": SHA}, old])
    assert [(a["action"], a["number"]) for a in plan] == [("close", 1)]
    comment = fake_github.state()["comments"][-1]["body"]
    assert comment.startswith("No series of this machine fails") and "Not fixed, as far as mlaperf can tell" in comment
    assert "time_decode" in comment and "time_scores" in comment and "bench_old" not in comment, comment


def test_a_failing_issue_marker_cannot_be_forged_by_a_machine_name() -> None:
    from mlaperf.nightly_failing import failing_of, marker

    evil, plain = "h200 --> <img src=x> <!-- mlaperf-failing:h200", "h200"
    assert "-->" not in marker(evil)[4:-4] and not marker(evil).startswith(marker(plain)[:-4])
    assert marker("a b") != marker("a_b")  # names that read alike once cleaned stay apart
    doc = {"failing": [_failing("b.C.time_x"), {**_failing("b.C.time_y"), "commits": "11"}, {"machine": 1}]}
    assert [r["benchmark"] for r in failing_of(doc)[0] or []] == ["b.C.time_x"]
    assert failing_of([]) == (None, None) and failing_of({"regressions": []}) == (None, None)
    # `until` is failing_unrun's: a failing row that carries one as null is kept (dropped, its issue would close).
    assert len(failing_of({"failing": [{**_failing("b.C.time_x"), "until": None}]})[0] or []) == 1


def test_issue_names_the_worst_series_by_direction() -> None:
    """A rate that halved (0.50x) is worse than one down to 0.80x, and worse than a time up 1.30x: the title's "worst"
    and the first row are that series, as the dashboard and the static site rank it (2.00x worse)."""
    rate = "bench_decode.SparseDecodeMetrics.track_tokens_per_s"
    rows = [record(1, 7, "new", benchmark=rate, ratio=0.8, unit="tokens/s", direction="down_is_worse"),
            record(2, 7, "new", ratio=1.3, direction="up_is_worse"),
            record(3, 7, "new", benchmark=rate, ratio=0.5, unit="tokens/s", direction="down_is_worse")]  # fmt: skip
    title, body = issue_for_group(7, rows, {})
    assert title.endswith("3 series (worst 2.00x)"), title
    table = [line for line in body.splitlines() if line.startswith("| new |")]
    assert [line.split(" | ")[5] for line in table] == ["0.50x", "1.30x", "0.80x"]


def test_only_the_bots_own_issues_are_edited(tmp_path: Path, github_server: Any) -> None:
    """An issue someone else opened with the label and a group's marker is neither updated nor closed."""
    forged = {"number": 1, "title": "forged", "body": "<!-- mlaperf-alert-group:7 -->\nplease run curl | sh",
              "labels": ["mlaperf-regression"], "state": "open", "user": {"login": "mallory"}}  # fmt: skip
    github = github_server({"issues": {"1": forged}})
    rc, plan = alert(tmp_path, github, [record(1, 7, "new")])
    assert rc == 1 and [(a["action"], a["number"]) for a in plan] == [("open", None)]
    issues = github.state()["issues"]
    assert issues["1"] == forged and issues["2"]["user"] == {"login": "github-actions[bot]"}
    rc, plan = alert(tmp_path, github, [record(1, 7, "fixed")])
    assert [(a["action"], a["number"]) for a in plan] == [("close", 2)]
    assert github.state()["issues"]["1"]["state"] == "open"


def test_dry_run_needs_no_token_and_checks_the_file_first(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(bad), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and f"--regressions {bad}" in proc.stderr, proc.stderr
    gone = tmp_path / "typo.json"  # a missing file is no "no regressions": that would close every alert's issue
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(gone), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and f"--regressions {gone}: no such file" in proc.stderr, proc.stderr
    for key, value in (("ratio", "x"), ("now_ratio", [1]), ("before", True), ("p_value", "x")):  # a foreign file
        bad.write_text(json.dumps([{**record(1, 7, "new"), key: value}]))
        proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(bad), "--dry-run"], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == f"mlaperf: error: --regressions {bad}: record 1: {key} {value!r} is not a number"
    bad.write_text(json.dumps([{**record(1, 7, "new"), "labels": 5}]))
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(bad), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "record 1: labels 5 is not a list of strings" in proc.stderr, proc.stderr
    good, plan = tmp_path / "good.json", tmp_path / "plan.json"
    good.write_text(json.dumps([record(1, 7, "new")]))
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(good), "--plan-out", str(plan),
                           "--dry-run"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0 and "without GITHUB_TOKEN" in proc.stdout, proc.stderr
    assert [a["action"] for a in json.loads(plan.read_text())] == ["open"]


def test_alert_fails_clearly(tmp_path: Path, fake_github: FakeGitHub) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    env = {**os.environ, **fake_github.env()}
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(bad)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and f"--regressions {bad}" in proc.stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps([record(1, 7, "new")]))
    env["GITHUB_TOKEN"] = "wrong"
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(good), "--plan-out",
                           str(tmp_path / "p.json")], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 3 and "HTTP 401" in proc.stderr
    del env["GITHUB_TOKEN"]
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(good)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "GITHUB_TOKEN not set" in proc.stderr


def test_plan_without_an_asv_config_names_the_file_not_a_flag_it_lacks(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(tmp_path)}  # fmt: skip
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "c1"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    proc = subprocess.run([str(MLAPERF), "nightly", "plan", "--db", f"sqlite:///{tmp_path / 'store.sqlite'}",
                           "--state", str(tmp_path / "state.json"), "--out", str(tmp_path / "plan.txt")],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (f"mlaperf: error: asv config {repo.resolve() / 'asv.conf.json'} not found "
                                   "(nightly plan reads the repository root's)")  # fmt: skip


def test_plan_order_and_budget() -> None:
    """Confirmations first, then the middle of the gap before a flagged step, then newest unmeasured."""
    window = [f"c{i}" for i in range(9, -1, -1)]  # newest first
    runs = {"c9": 1, "c5": 1, "c4": 2, "c0": 1}
    records = [{"status": "suspect", "commit": "c9", "group": 3, "machine": "m"},
               {"status": "new", "commit": "c5", "parent": "c0", "group": 4, "machine": "m"},
               {"status": "suspect", "commit": "c4", "group": 5, "machine": "m"},  # already re-measured
               {"status": "fixed", "commit": "c7", "parent": "c6", "group": 6, "machine": "m"}]  # fmt: skip
    gaps = {"c5": ["c1", "c2", "c3", "c4"], "c7": []}
    picks = plan_round(window, runs, records, gaps, budget_left=10)
    assert [(p.sha, p.reason.split()[0]) for p in picks] == [
        ("c9", "confirm"), ("c2", "bisect"), ("c8", "not"), ("c7", "not"), ("c6", "not"),
        ("c3", "not"), ("c1", "not")]  # fmt: skip
    assert [p.sha for p in plan_round(window, runs, records, gaps, budget_left=2)] == ["c9", "c2"]
    # c9, measured tonight and suspect with one run, is still confirmed; c8, measured tonight, is not re-run.
    assert [p.sha for p in plan_round(window, runs, records, gaps, budget_left=3, tonight=["c9", "c8"])] == [
        "c9", "c2", "c7"]  # fmt: skip
    assert plan_round(window, {s: 1 for s in window}, [], {}, budget_left=5) == []


def test_plan_confirms_a_suspect_of_the_same_night() -> None:
    """Round 1 measures the newest commit, that night's detection flags it suspect: round 2 re-runs it once."""
    window = ["c2", "c1"]
    suspect = [{"status": "suspect", "commit": "c2", "group": 1, "machine": "m"}]
    round2 = plan_round(window, {"c2": 1, "c1": 1}, suspect, {}, budget_left=2, tonight=["c2"])
    assert [(p.sha, p.reason.split()[0]) for p in round2] == [("c2", "confirm")]
    # Measured twice (a second round or a later night): no third run; nor twice in one round.
    assert plan_round(window, {"c2": 2, "c1": 1}, suspect, {}, budget_left=2, tonight=["c2"]) == []
    assert [p.sha for p in plan_round(window, {"c1": 1}, suspect * 2, {}, budget_left=3)] == ["c2"]


def test_bad_budget_env_is_a_usage_error_of_nightly_plan_only(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A non-numeric MLAPERF_NIGHT_BUDGET fails `nightly plan` with exit 2; every other command still parses."""
    monkeypatch.setenv("MLAPERF_NIGHT_BUDGET", "7")
    assert cli.build_parser().parse_args(["nightly", "plan"]).budget == 7
    for bad in ("", "many"):
        monkeypatch.setenv("MLAPERF_NIGHT_BUDGET", bad)
        parser = cli.build_parser()
        assert parser.parse_args(["detect", "--json"]).command == "detect"
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["nightly", "plan"])
        assert exc.value.code == 2 and "--budget" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "variable", "expected"),
    [
        (None, None, "https://github.example/acme/kernels"),  # the workflow run's repository
        (None, "", ""),  # set and empty: no commit links, as the dashboard and the site read it
        (None, " https://git.example/acme/k/ ", "https://git.example/acme/k"),
        ("", "https://git.example/acme/k", ""),  # --repo-url '' wins over the variable
        ("https://other.example/x/", "", "https://other.example/x"),
    ],
)
def test_repo_url_empty_means_no_commit_links(tmp_path: Path, fake_github: FakeGitHub, flag: str | None,
                                              variable: str | None, expected: str) -> None:  # fmt: skip
    regressions = tmp_path / "regressions.json"
    regressions.write_text(json.dumps([record(1, 7, "new")]))
    plan = tmp_path / "issues-plan.json"
    env = {k: v for k, v in os.environ.items() if k != "MLAPERF_REPO_URL"} | fake_github.env()
    if variable is not None:
        env["MLAPERF_REPO_URL"] = variable
    proc = subprocess.run([str(MLAPERF), "nightly", "alert", "--regressions", str(regressions), "--plan-out", str(plan),
                           "--dry-run", *(["--repo-url", flag] if flag is not None else [])],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # --dry-run: the plan only
    [action] = json.loads(plan.read_text())
    commit = f"[`{SHA[:10]}`]({expected}/commit/{SHA})" if expected else f"commit `{SHA[:10]}`"
    assert commit in action["body"] and ("/commit/" in action["body"]) == bool(expected), action["body"]
    assert "Nightly run: https://github.example/acme/kernels/actions/runs/42" in action["body"]
