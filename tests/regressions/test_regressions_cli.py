"""`detect` and `compare` command-line contracts: JSON fields, markdown, exit codes, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.engine import make_engine
from db.models import Commit
from db.synthetic import SyntheticHistory, write_synthetic_results
from mlaperf.cli import main
from regressions.report import MARKER, detect_table

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"
Ingest = Callable[[Engine, list[Path]], None]


@pytest.fixture
def history(store_url: str, tmp_path: Path, ingest: Ingest) -> SyntheticHistory:
    """30 commits, a 20% step at commit 20 (time_ series; the track_ series gain throughput)."""
    h = write_synthetic_results(tmp_path / "results", commits=30, series=36, steps={20: 1.2}, seed=5)
    eng = make_engine(store_url)
    ingest(eng, [tmp_path / "results"])
    eng.dispose()
    return h


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def regs(out: str) -> list[dict]:
    """The regression records of a `detect --json` document."""
    doc = json.loads(out)
    assert doc["version"] == 2
    assert set(doc) == {"version", "summary", "groups", "failing", "failing_unrun", "failing_machine", "regressions"}
    return doc["regressions"]


def test_detect_json_contract(store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json")
    assert rc == 0
    data = regs(out)
    assert len(data) == 30  # the 30 time_ series; throughput going up is no regression
    doc = json.loads(out)
    assert doc["summary"]["flagged"] == 30 and doc["summary"]["flagged_by_status"] == {"new": 30}
    assert doc["summary"]["confirmed"] == 0 and doc["summary"]["mode"] == "full"
    (group,) = doc["groups"]
    assert group["range"] == {"parent": history.shas[19], "commit": history.shas[20]}
    assert group["status"] == "new" and group["kind"] == "machine-wide" and group["size"] == 30
    assert sorted(group["members"]) == sorted(r["id"] for r in data) and group["open"] == 30
    for r in data:
        assert {"benchmark", "params", "machine", "commit", "before", "after", "ratio"} <= r.keys()
        assert r["commit"] == history.shas[20] and len(r["commit"]) == 40
        assert r["machine"] == history.machine and r["benchmark"].endswith(".time_case")
        assert set(r["params"]) == {"impl", "concurrency", "topk"}
        assert r["after"] / r["before"] == pytest.approx(r["ratio"]) and r["ratio"] == pytest.approx(1.2, rel=0.02)
        assert r["new"] is True and r["status"] == "new" and r["event"] == "flagged"
        assert r["parent"] == history.shas[19] and r["fixed_at"] is None and r["closed_at"] is None
        assert r["close_reason"] is None and r["group_commit"] == history.shas[20]
        assert r["labels"] == [] and r["returns_to_earlier_level"] is False
        # One alert group: one machine, one commit, 30 of its 36 series (machine-wide).
        assert isinstance(r["group"], int) and r["group"] == data[0]["group"]
        assert r["machine_wide"] is True and r["group_size"] == 30 and r["group_status"] == "new"
    assert len({r["id"] for r in data}) == 30
    # Second run: same regressions, none new; --fail-on-new only fails when something is new.
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json", "--fail-on-new")
    assert rc == 0 and len(regs(out)) == 30
    assert not any(r["new"] or r["event"] for r in regs(out))
    # --list: the same records from a read-only engine (PostgreSQL: a read-only transaction), nothing examined.
    rc, listed, _ = run(capsys, "detect", "--db", store_url, "--json", "--list")
    assert rc == 0 and regs(listed) == regs(out) and json.loads(listed)["summary"] is None
    for flag in ("--full", "--fail-on-new"):
        rc, _, err = run(capsys, "detect", "--db", store_url, "--list", flag)
        assert rc == 2 and f"--list re-examines nothing; {flag} has no meaning with it" in err


def test_detect_suspects_do_not_fail_until_confirmed(
    store_url: str, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step on the newest commit is listed the same night as suspect (exit 0 with --fail-on-new);
    the next commit confirms it: listed as new, exit 1."""
    h = write_synthetic_results(tmp_path / "results", commits=22, series=12, steps={20: 1.3}, seed=2)
    eng = make_engine(store_url)
    ingest(eng, [p for p in (tmp_path / "results" / h.machine).glob("*.json") if h.shas[21][:8] not in p.name])
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json", "--fail-on-new")
    data = regs(out)
    assert rc == 0 and len(data) == 12 and {r["status"] for r in data} == {"suspect"}
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--status", "new")
    assert rc == 0 and out.rstrip().endswith("\nno new regressions (12 suspect; --all lists them)")
    ingest(eng, list((tmp_path / "results" / h.machine).glob(f"{h.shas[21][:8]}-*.json")))
    eng.dispose()
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--fail-on-new")
    assert rc == 1 and "12 confirmed" in out
    assert f"group {1}: {h.machine} at {h.shas[19][:10]}..{h.shas[20][:10]}, 12 series, new, machine-wide" in out
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json", "--status", "new")
    assert {r["event"] for r in regs(out)} == {None} and len(regs(out)) == 12


def test_detect_table_and_fail_on_new(
    store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--fail-on-new")
    assert rc == 1
    assert "30 flagged (status now: 30 new) in 1 new group; earlier alerts: 0 confirmed" in out
    assert history.shas[20][:10] in out
    assert "1.2" in out
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--status", "fixed")
    assert rc == 0 and out.rstrip().endswith("\nno fixed regressions (30 new; --all lists them)")


def test_detect_that_flags_only_fixed_steps_does_not_say_no_regressions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled history: detect flags the deliberate regression and its revert in one run, so all four are
    fixed. '4 flagged (status now: 4 fixed)' then 'no regressions' read as a contradiction."""
    url = f"sqlite:///{tmp_path / 'bundled.sqlite'}"
    assert run(capsys, "ingest", str(ROOT / "history" / "results"), "--db", url, "--repo", str(ROOT), "-q")[0] == 0
    rc, out, _ = run(capsys, "detect", "--db", url)
    lines = out.splitlines()
    assert rc == 0 and "4 flagged (status now: 4 fixed)" in lines[0]
    assert lines[1:] == ["no open regressions (4 fixed; --all lists them)"]
    rc, out, _ = run(capsys, "detect", "--db", url, "--all")
    assert rc == 0 and out.count("\nfixed ") == 4 and "no open regressions" not in out


def test_an_empty_listing_names_what_it_left_out() -> None:
    assert detect_table([], closed={"fixed": 4, "retired": 0}) == "no open regressions (4 fixed; --all lists them)"
    assert detect_table([], closed={}) == "no regressions stored"


def test_detect_threshold_flag(store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json", "--threshold", "25%")
    assert rc == 0 and regs(out) == [] and json.loads(out)["groups"] == []
    for bad, why in (("lots", "not a number: 'lots' (e.g. 0.05 or 5%)"), ("1000%", "must be in (0, 10)"),
                     ("0", "must be in (0, 10)")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["detect", "--db", store_url, "--threshold", bad])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "--threshold" in err and why in err, err


def test_compare_regression_exit_1_json(
    store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    md_file, js_file = tmp_path / "c.md", tmp_path / "c.json"
    rc, out, _ = run(
        capsys, "compare", history.shas[15][:10], history.shas[25], "--db", store_url, "--json",
        "--markdown-out", str(md_file), "--json-out", str(js_file),
    )  # fmt: skip
    assert rc == 1
    data = json.loads(out)
    assert data == json.loads(js_file.read_text())
    assert len(data) == 36
    for c in data:
        assert {
            "benchmark",
            "params",
            "machine",
            "base",
            "head",
            "ratio",
            "significant",
            "regression",
        } <= c.keys()
    regs = [c for c in data if c["regression"]]
    assert len(regs) == 30 and all(c["benchmark"].endswith("time_case") for c in regs)
    assert all(c["significant"] and c["ratio"] == pytest.approx(1.2, rel=0.05) for c in regs)
    improved = [c for c in data if c["status"] == "improved"]
    assert len(improved) == 6  # track_ (tokens/s) rose 20%
    md = md_file.read_text()
    assert md.startswith(MARKER) and "**30 regressions**" in md and "6 improvements" in md


def test_compare_no_regression_exit_0_markdown(
    store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(capsys, "compare", history.shas[3], history.shas[12], "--db", store_url)
    assert rc == 0 and "warning" not in err
    assert out.startswith(MARKER) and "**0 regressions**" in out and "<summary>Unchanged (36)</summary>" in out
    # The commits the wrong way round: compared as given, with a warning (a review: no word said so).
    rc, out, err = run(capsys, "compare", history.shas[12], history.shas[3], "--db", store_url)
    assert rc == 0 and f"warning: BASE {history.shas[12][:12]} comes after HEAD {history.shas[3][:12]}" in err


def test_compare_bad_usage_exit_2(
    store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "compare", history.shas[3], "0123abcd", "--db", store_url)
    assert rc == 2 and "HEAD" in err and "0123abcd" in err
    rc, _, err = run(capsys, "compare", "nonsense-ref", history.shas[3], "--db", store_url)
    assert rc == 2 and "BASE" in err and "nonsense-ref" in err
    rc, _, err = run(capsys, "compare", history.shas[3], history.shas[4], "--db", store_url, "--machine", "nope")
    assert rc == 2 and "--machine" in err and "no machine named 'nope'" in err and history.machine in err
    with Session(make_engine(store_url)) as s, s.begin():  # a commit no machine measured: said where each was
        s.add(Commit(sha="e" * 40))
    rc, _, err = run(capsys, "compare", history.shas[3], "e" * 40, "--db", store_url)
    assert rc == 2 and f"BASE on {history.machine}; HEAD on no machine" in err, err
    with Session(make_engine(store_url)) as s, s.begin():
        s.add(Commit(sha=history.shas[3][:8] + "f" * 32))
    rc, _, err = run(capsys, "compare", history.shas[3][:8], history.shas[4], "--db", store_url)
    assert rc == 2 and "ambiguous" in err
    with pytest.raises(SystemExit) as exc:
        main(["compare", history.shas[3]])
    assert exc.value.code == 2
    for command in (["compare", "HEAD~1", "HEAD"], ["ingest"]):  # one --repo, checked the same for both
        with pytest.raises(SystemExit) as exc:
            main([*command, "--db", store_url, "--repo", "/nonexistent/repo"])
        assert exc.value.code == 2 and "--repo: no folder '/nonexistent/repo'" in capsys.readouterr().err


def test_compare_git_refs(
    store_url: str, history: SyntheticHistory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    real = []
    for i in range(2):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
        real.append(
            subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        )
    # The store's commits 15 and 25 become this repository's two commits.
    with Session(make_engine(store_url)) as s, s.begin():
        for old, new in ((history.shas[15], real[0]), (history.shas[25], real[1])):
            s.execute(update(Commit).where(Commit.sha == old).values(sha=new))
    rc, out, _ = run(capsys, "compare", "HEAD~1", "HEAD", "--db", store_url, "--repo", str(repo), "--json")
    assert rc == 1 and sum(c["regression"] for c in json.loads(out)) == 30


def test_real_asv_output_openblas(tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]) -> None:
    """Third-party asv results (no samples, three machines): detect and compare run end to end."""
    url = f"sqlite:///{tmp_path / 'ob.sqlite'}"
    ingest(make_engine(url), [FIXTURE])
    rc, out, _ = run(capsys, "detect", "--db", url, "--json")
    assert rc == 0
    data = regs(out)
    machines = {"gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"}
    for r in data:
        assert r["machine"] in machines and len(r["commit"]) == 40 and r["ratio"] > 1.05
        assert r["benchmark"].split(".")[-1].startswith("time_")
    rc, out, _ = run(capsys, "detect", "--db", url, "--json")
    assert not any(r["new"] for r in regs(out))
    runs = [json.loads(p.read_text()) for p in (FIXTURE / "gha-aws-skylake").glob("*.json")]
    runs = sorted((r for r in runs if "commit_hash" in r), key=lambda r: r["date"])
    first, last = runs[-10]["commit_hash"], runs[-1]["commit_hash"]  # same suite at both
    rc, out, _ = run(capsys, "compare", first, last, "--db", url, "--machine", "gha-aws-skylake", "--json")
    assert rc in (0, 1)
    rows = json.loads(out)
    assert rows and all(c["machine"] == "gha-aws-skylake" for c in rows)
    # No samples in these files: significance comes from the series' history on that machine.
    assert {c["method"] for c in rows} <= {"history", "ci99", "none"} and "history" in {c["method"] for c in rows}


@pytest.mark.parametrize("command", ["detect", "compare"])
def test_help(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mlaperf.cli", command, "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0 and "--db" in out.stdout and "--threshold" in out.stdout and "--json" in out.stdout


@pytest.mark.parametrize("extra", [[], ["--json"], ["--list", "--all"]])
def test_detect_output_to_a_closed_pipe_ends_quietly(
    store_url: str, history: SyntheticHistory, extra: list[str]
) -> None:
    """`mlaperf detect ... | head`: the reader is gone before the listing is written; no traceback, no
    'internal error', the usual exit status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlaperf.cli", "detect", "--db", store_url, *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.close()  # like `head` after its lines: every write of the child now fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "internal error" not in err and "BrokenPipe" not in err


def test_list_all_shows_where_and_why_alerts_closed(
    store_url: str, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step reverted three commits later: `--list --all` shows it fixed, the commit where it returned and
    the reason; the JSON carries fixed_at, closed_at and close_reason; p-values have a floor."""
    h = write_synthetic_results(tmp_path / "r", commits=30, series=6, steps={20: 1.3, 23: 1 / 1.3}, seed=8)
    eng = make_engine(store_url)
    ingest(eng, [tmp_path / "r"])
    eng.dispose()
    rc, out, _ = run(capsys, "detect", "--db", store_url)
    # Counted once, as flagged (its status said as such), not again among the earlier alerts fixed by this run.
    assert rc == 0 and "6 flagged (status now: 6 fixed)" in out
    assert "earlier alerts: 0 confirmed, 0 transient, 0 fixed," in out
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--list", "--all")
    assert rc == 0 and "closed at" in out and "reason" in out and h.shas[23][:10] in out and "returned" in out
    assert "< 1e-12" in out or "e-" in out
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--list", "--all", "--json")
    recs = regs(out)
    assert {(r["status"], r["fixed_at"], r["closed_at"], r["close_reason"]) for r in recs} == {
        ("fixed", h.shas[23], h.shas[23], "returned")
    }
    assert all(r["p_value"] >= 1e-12 for r in recs)
    (group,) = json.loads(out)["groups"]
    assert group["fixed"] == 6 and group["open"] == 0 and group["status"] == "fixed"


def test_triage_shows_in_the_listing(store_url: str, history: SyntheticHistory,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Assigned on the dashboard, seen in the CLI: `detect --json` and `--list` carry assignee and issue."""
    from sqlalchemy.orm import Session

    from db.regression_queries import set_regression_triage

    run(capsys, "detect", "--db", store_url, "--json")
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json")
    first, *rest = regs(out)
    assert first["assignee"] is None and first["issue_url"] is None
    eng = make_engine(store_url)
    with Session(eng) as s:
        set_regression_triage(s, first["id"], assignee="ana", issue_url="https://github.com/acme/kernels/issues/7")
        s.commit()
    eng.dispose()
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--json")
    got = {r["id"]: r for r in regs(out)}
    assert (got[first["id"]]["assignee"], got[first["id"]]["issue_url"]) == (
        "ana", "https://github.com/acme/kernels/issues/7")
    assert all(got[r["id"]]["assignee"] is None for r in rest)
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--list")
    header = next(line for line in out.splitlines() if line.startswith("status "))
    lines = out.splitlines()
    assert header.split()[-2:] == ["assignee", "issue"]
    assert sum("https://github.com/acme/kernels/issues/7" in line and " ana " in line for line in lines) == 1
