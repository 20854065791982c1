"""QA findings on `mlaperf detect` and `compare` through the real command line and a real store: values of 0
or below, alert groups after backfilled commits, a mistyped --db, options --list cannot honour, thresholds
and the summary line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from db.engine import make_engine
from db.synthetic import write_synthetic_results
from mlaperf.cli import main
from regressions.pr_schema import parse_report
from regressions.report import compare_markdown

ROOT = Path(__file__).resolve().parents[2]
Ingest = Callable[[Engine, list[Path]], None]
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
           "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def write_run(folder: Path, i: int, benches: dict[str, list[float]]) -> str:
    """One asv results file (commit ``i``) of single values with 99% intervals and three samples each."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "qa", "version": 1}))
    sha = f"{i:02d}" + "c" * 38
    results: dict[str, Any] = {}
    for name, values in benches.items():
        results[name] = [values, [], "1", 1, 1.0, [v - abs(v) * 0.02 for v in values],
                         [v + abs(v) * 0.02 for v in values], values, values, [1] * len(values), [3] * len(values),
                         [[v * 0.99, v, v * 1.01] for v in values]]  # fmt: skip
    doc = {"commit_hash": sha, "env_name": "py", "date": 1_700_000_000_000 + i * 3_600_000,
           "params": {"machine": "qa"}, "python": "3.11", "requirements": {}, "env_vars": {},
           "result_columns": COLUMNS, "results": results, "durations": {}, "version": 2}  # fmt: skip
    (folder / f"{sha[:8]}-py.json").write_text(json.dumps(doc))
    return sha


@pytest.fixture
def signed_store(store_url: str, tmp_path: Path, ingest: Ingest) -> tuple[str, list[str]]:
    """12 commits: peakmem 0 -> 512 MiB and a time 0 -> 0.5 s at commit 6, a track_ -5 -> -6.25 (down:
    better where up is worse) and a rate 0 -> 100 tokens/s (better)."""
    shas = []
    for i in range(12):
        after = i >= 6
        shas.append(write_run(tmp_path / "r" / "qa", i, {
            "mod.Mem.peakmem_buf": [512.0 * 2**20 if after else 0.0],
            "mod.T.time_noop": [0.5 if after else 0.0],
            "mod.S.track_offset": [-6.25 if after else -5.0],
            "mod.R.track_tokens_per_s": [100.0 if after else 0.0],
        }))  # fmt: skip
    eng = make_engine(store_url)
    ingest(eng, [tmp_path / "r"])
    eng.dispose()
    return store_url, shas


def test_compare_judges_values_of_zero_and_below(
    signed_store: tuple[str, list[str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url, shas = signed_store
    rc, out, _ = run(capsys, "compare", shas[5], shas[6], "--db", url, "--json")
    rows = {r["benchmark"]: r for r in json.loads(out)}
    assert rc == 1  # a regression, not "unchanged"
    assert rows["mod.Mem.peakmem_buf"]["status"] == "regressed" and rows["mod.T.time_noop"]["status"] == "regressed"
    assert rows["mod.S.track_offset"]["status"] == "improved"  # -5 -> -6.25 went down, up is worse
    assert rows["mod.R.track_tokens_per_s"]["status"] == "improved"
    assert all(r["ratio"] is None and r["slowdown"] is None for r in rows.values())  # no ratio of such values
    # The JSON is a valid report for the PR renderer, and the markdown lists them as regressions.
    parsed = parse_report(out.encode())
    md = compare_markdown(parsed, base=shas[5], head=shas[6], machines=["qa"], threshold_note="5%")
    assert "**2 regressions**" in md and "512 MiB" in md
    rc, text, _ = run(capsys, "compare", shas[5], shas[6], "--db", url, "--format", "text")
    assert "worse (from 0)" in text and "-25% better" in text and "better (from 0)" in text
    # Nothing moved: 0 -> 0 stays unchanged.
    rc, out, _ = run(capsys, "compare", shas[1], shas[2], "--db", url, "--json")
    assert rc == 0 and {r["status"] for r in json.loads(out)} == {"unchanged"}


def test_detect_on_values_of_zero_and_below_never_warns(signed_store: tuple[str, list[str]]) -> None:
    url, _ = signed_store
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "mlaperf.cli", "detect", "--db", url,
                           "--full"], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr


def test_detect_refuses_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "typo" / "typo.sqlite"
    rc, _, err = run(capsys, "detect", "--db", f"sqlite:///{missing}", "--fail-on-new")
    assert rc == 2 and "no database at" in err
    assert not missing.exists() and not missing.parent.exists()


@pytest.mark.parametrize("extra", [["--config", "pyproject.toml"], ["--threshold", "10%"], ["--lookback", "50"]])
def test_list_refuses_options_it_cannot_honour(
    signed_store: tuple[str, list[str]], capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    rc, _, err = run(capsys, "detect", "--db", signed_store[0], "--list", *extra)
    assert rc == 2 and extra[0] in err and "--list" in err


def test_unknown_machine_and_all_with_status_are_refused(
    signed_store: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url = signed_store[0]
    for extra in ([], ["--list"]):
        rc, out, err = run(capsys, "detect", "--db", url, "--machine", "bogus", *extra)
        assert rc == 2 and "no machine named 'bogus'" in err and "qa" in err, (extra, out)
        rc, _, err = run(capsys, "detect", "--db", url, "--all", "--status", "new", *extra)
        assert rc == 2 and "--all" in err and "--status" in err
    rc, _, err = run(capsys, "detect", "--db", url, "--list", "--machine", "qa")
    assert rc == 0


def test_a_bare_threshold_of_one_or_more_is_refused(
    signed_store: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url = signed_store[0]
    for command in (["detect", "--db", url], ["compare", "HEAD", "HEAD", "--db", url]):
        with pytest.raises(SystemExit) as exc:
            main([*command, "--threshold", "2"])
        assert exc.value.code == 2 and "did you mean 2%?" in capsys.readouterr().err
    rc, out, _ = run(capsys, "detect", "--db", url, "--threshold", "200%", "--json")
    assert rc == 0 and json.loads(out)["summary"] is not None


def test_the_summary_line_says_which_fixed_is_which(
    store_url: str, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    write_synthetic_results(tmp_path / "r", commits=30, series=6, steps={20: 1.3, 23: 1 / 1.3}, seed=8)
    ingest(make_engine(store_url), [tmp_path / "r"])
    rc, out, _ = run(capsys, "detect", "--db", store_url)
    line = out.splitlines()[0]
    assert "6 flagged (status now: 6 fixed) in 1 new group; earlier alerts: 0 confirmed, 0 transient, 0 fixed" in line


def test_a_dry_run_shows_another_threshold_and_stores_nothing(
    store_url: str, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that stores judges every alert by its own thresholds; --dry-run shows what they would do first."""
    write_synthetic_results(tmp_path / "r", commits=30, series=6, steps={20: 1.3}, seed=8)
    ingest(make_engine(store_url), [tmp_path / "r"])
    assert run(capsys, "detect", "--db", store_url)[0] == 0
    before = run(capsys, "detect", "--db", store_url, "--list", "--all", "--json")[1]
    rc, out, _ = run(capsys, "detect", "--db", store_url, "--full", "--threshold", "50%", "--dry-run", "--all")
    assert rc == 0 and out.startswith("(dry run: nothing stored) detect (full)") and "6 transient" in out, out
    assert run(capsys, "detect", "--db", store_url, "--list", "--all", "--json")[1] == before
    rc, _, err = run(capsys, "detect", "--db", store_url, "--list", "--dry-run")
    assert rc == 2 and "--dry-run has no meaning" in err


def _groups(url: str, capsys: pytest.CaptureFixture[str]) -> set[tuple[Any, ...]]:
    rc, out, _ = run(capsys, "detect", "--db", url, "--list", "--all", "--json")
    assert rc == 0
    doc = json.loads(out)
    ranges = {g["id"]: (g["range"]["parent"], g["range"]["commit"], g["machine_wide"], g["series_measured"])
              for g in doc["groups"]}  # fmt: skip
    return {(r["benchmark"], json.dumps(r["params"]), r["parent"], r["commit"], r["status"], *ranges[r["group"]])
            for r in doc["regressions"]}  # fmt: skip


def test_backfilled_commits_move_alerts_and_their_group(
    store_url: str, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commits 17-21 arrive after the nightly saw the step at 22: its alerts move to 20, and their group's
    range and machine-wide count follow, as in a store that had every commit at once (`--full`)."""
    h = write_synthetic_results(tmp_path / "all", commits=30, series=12, steps={20: 1.3}, seed=3)
    later = {sha[:8] for sha in h.shas[17:22]}
    for part, keep in (("first", lambda name: name[:8] not in later), ("later", lambda name: name[:8] in later)):
        shutil.copytree(tmp_path / "all", tmp_path / part,
                        ignore=lambda d, names, keep=keep: [n for n in names if n.endswith("-existing-py3.11.json")
                                                            and not keep(n)])  # fmt: skip
    nightly = f"sqlite:///{tmp_path / 'nightly.sqlite'}"
    ingest(make_engine(nightly), [tmp_path / "first"])
    assert run(capsys, "detect", "--db", nightly)[0] == 0
    before = _groups(nightly, capsys)
    assert {(r[2], r[3]) for r in before} == {(h.shas[16], h.shas[22])}
    ingest(make_engine(nightly), [tmp_path / "later"])
    assert run(capsys, "detect", "--db", nightly)[0] == 0
    ingest(make_engine(store_url), [tmp_path / "all"])
    assert run(capsys, "detect", "--db", store_url, "--full")[0] == 0
    full = _groups(store_url, capsys)
    assert {(r[2], r[3], r[5], r[6]) for r in full} == {(h.shas[19], h.shas[20], h.shas[19], h.shas[20])}
    assert _groups(nightly, capsys) == full


def test_signed_values_take_the_ratio_rules_thresholds_in_both_directions() -> None:
    """A value at or below 0 has no ratio; its relative change meets the same thresholds a ratio would, the
    right way round for a rate (down is worse) too: -100 -> -104.8 is the 4.8% fall that 100 -> 95.2 is."""
    from regressions.compare import SeriesPair, compare_pair
    from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE

    def status(base: float, head: float, direction: str) -> str:
        ci = lambda v: (v - 0.01 * abs(v), v + 0.01 * abs(v))  # noqa: E731 - intervals apart: significant
        pair = SeriesPair(benchmark="m.C.track_x", params={}, machine="m", unit="unit", direction=direction,
                          threshold=0.05, base=base, head=head, base_ci=ci(base), head_ci=ci(head))  # fmt: skip
        return compare_pair(pair).status

    for direction in (UP_IS_WORSE, DOWN_IS_WORSE):
        for base, head in ((100.0, 95.2), (100.0, 104.8), (100.0, 106.0), (100.0, 94.0)):
            assert status(-base, -base + (head - base), direction) == status(base, head, direction), (base, head)
    assert status(-100.0, -104.8, DOWN_IS_WORSE) == "regressed" and status(-100.0, -95.1, DOWN_IS_WORSE) == "unchanged"
