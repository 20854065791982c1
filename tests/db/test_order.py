"""History order (``commit.position``): git generation where the repository knows the commit, its date among
those otherwise, date and id with no repository at all (both backends)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from db import gitmeta, queries
from db.engine import downgrade, make_engine, upgrade
from db.history_order import history_order
from db.ingest import ingest_paths
from db.models import Commit, Machine, Regression, Result
from db.synthetic import write_git_history, write_synthetic_results
from tests.db.conftest import REPO_ROOT, run_cli

TIE = dt.datetime(2025, 6, 1, 12, 0, 0)
COMMITS = 8


def _files_newest_first(root: Path, machine: str, shas: list[str]) -> list[Path]:
    # Ingested newest first, so commit ids run against history: date-then-id order would be reversed.
    return [next((root / machine).glob(f"{sha[:8]}-*.json")) for sha in reversed(shas)]


def test_tied_dates_follow_git_order(db_url: str, tmp_path: Path) -> None:
    shas = write_git_history(tmp_path / "repo", COMMITS, date=TIE)
    h = write_synthetic_results(
        tmp_path / "results", commits=COMMITS, series=6, shas=shas, dates=[TIE] * COMMITS, machine="m"
    )
    engine = make_engine(db_url)
    files = _files_newest_first(h.root, "m", shas)
    # First without the repository: no generation, so the id fallback (here: reversed) is all there is.
    assert ingest_paths(engine, files, progress=False, repo=None).ok
    with Session(engine) as s:
        assert list(queries.commits(s)["sha"]) == shas[::-1]
        assert queries.commits(s)["generation"].isna().all()
    # Again with it: the files are unchanged, yet the stored commits get their generations.
    summary = ingest_paths(engine, files, progress=False, repo=tmp_path / "repo")
    assert summary.unchanged == COMMITS and summary.described == COMMITS
    with Session(engine) as s:
        c = queries.commits(s, machine="m")
        assert list(c["sha"]) == shas and list(c["generation"]) == list(range(1, COMMITS + 1))
        assert c["date"].nunique() == 1
        for row in queries.series(s, machine="m").itertuples():
            assert list(queries.history(s, row.benchmark, row.params_key, "m")["sha"]) == shas
        bench_id, key = s.execute(sa.select(Result.benchmark_id, Result.params_key).limit(1)).one()
        machine_id = s.scalar(sa.select(Machine.id).where(Machine.name == "m"))
        ids = dict(s.execute(sa.select(Commit.sha, Commit.id)).all())
        s.add_all(
            Regression(benchmark_id=bench_id, params_key=key, params=json.loads(key), machine_id=machine_id,
                       commit_id=ids[sha], before=1.0, after=2.0, ratio=2.0, direction="up_is_worse")
            for sha in (shas[2], shas[5], shas[3])
        )  # fmt: skip
        s.flush()
        assert list(queries.regressions(s)["sha"]) == [shas[5], shas[3], shas[2]]  # newest commit first
        s.rollback()
    engine.dispose()


def test_commits_git_does_not_know_are_placed_by_date_among_the_known(db_url: str, tmp_path: Path) -> None:
    """A commit the repository lacks (not fetched, another fork's) goes where its date puts it, not before the
    whole history; ingest names it. Before 0009 it sorted first, and detection read the history's newest run
    as its oldest."""
    shas = write_git_history(tmp_path / "repo", 3, date=TIE)
    newer, between, older = "f" * 40, "e" * 40, "d" * 40
    h = write_synthetic_results(
        tmp_path / "results",
        commits=6,
        series=6,
        shas=[shas[2], newer, shas[0], between, older, shas[1]],
        dates=[TIE + dt.timedelta(days=2), TIE + dt.timedelta(days=9), TIE, TIE + dt.timedelta(days=1),
               TIE - dt.timedelta(days=1), TIE + dt.timedelta(days=1)],
        machine="m",
    )  # fmt: skip
    engine = make_engine(db_url)
    others = write_synthetic_results(tmp_path / "other", commits=2, series=6, machine="x")  # git knows neither
    alone = ingest_paths(make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}"), [others.root], progress=False,
                         repo=tmp_path / "repo")  # fmt: skip
    assert alone.ok and alone.unknown_commits == [] and alone.unknown_note() is None  # all in date order: no mix
    summary = ingest_paths(engine, [h.root], progress=False, repo=tmp_path / "repo")
    assert summary.ok and summary.unknown_commits == [older, between, newer]
    assert f"3 commits not in the repository {tmp_path / 'repo'}: dddddddddd, eeeeeeeeee" in str(summary.unknown_note())
    with Session(engine) as s:
        assert list(queries.commits(s)["sha"]) == [older, shas[0], shas[1], between, shas[2], newer]
        assert s.execute(sa.select(Commit.generation).where(Commit.sha == newer)).scalar_one() is None
        for row in queries.series(s, machine="m").itertuples():
            assert list(queries.history(s, row.benchmark, row.params_key, "m")["sha"])[-1] == newer
    engine.dispose()


def test_ingest_without_a_repository_warns_that_tied_dates_are_a_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The bundled history outside a clone: three commits share one date, so date order puts the revert
    before the regression and detect flags nothing. Ingest says so (a warning: the exit status stays 0);
    with --repo git orders them and there is nothing to warn about."""
    monkeypatch.chdir(tmp_path)  # no git repository here
    bundled = str(REPO_ROOT / "history" / "results")
    code, _, err = run_cli(capsys, "ingest", "--db", f"sqlite:///{tmp_path / 'a.sqlite'}", bundled)
    assert code == 0
    assert ("WARNING 12 commits placed in history by commit date (no git repository here); 3 commits of the "
            "store share a timestamp with another, so their order is a guess") in err
    assert "pass --repo" in err
    code, _, err = run_cli(capsys, "ingest", "--db", f"sqlite:///{tmp_path / 'b.sqlite'}", bundled,
                           "--repo", str(REPO_ROOT))  # fmt: skip
    assert code == 0 and "WARNING" not in err


def test_a_repository_that_knows_no_commit_warns_only_of_tied_dates(tmp_path: Path) -> None:
    write_git_history(tmp_path / "repo", 2, date=TIE)
    tied = write_synthetic_results(tmp_path / "tied", commits=4, series=2, dates=[TIE, TIE, TIE, TIE], machine="m")
    summary = ingest_paths(make_engine(f"sqlite:///{tmp_path / 't.sqlite'}"), [tied.root], progress=False,
                           repo=tmp_path / "repo")  # fmt: skip
    assert (summary.by_date, summary.date_ties) == (4, 4)
    assert f"4 commits placed in history by commit date (none of them is in the repository {tmp_path / 'repo'})" \
        in str(summary.order_note())
    apart = write_synthetic_results(tmp_path / "apart", commits=4, series=2, machine="m")
    summary = ingest_paths(make_engine(f"sqlite:///{tmp_path / 'u.sqlite'}"), [apart.root], progress=False,
                           repo=tmp_path / "repo")  # fmt: skip
    assert summary.date_ties == 0 and summary.order_note() is None  # another project's history, in date order


def test_history_order_rule() -> None:
    day = dt.timedelta(days=1)
    # (id, generation, date): git order wins over dates among known commits, even against them.
    assert history_order([(1, 2, TIE), (2, 1, TIE + day), (3, None, TIE + 2 * day)]) == [2, 1, 3]
    # An unknown commit follows the known commit of highest generation dated at or before it.
    assert history_order([(1, 1, TIE + 3 * day), (2, 2, TIE), (3, None, TIE + day)]) == [1, 2, 3]
    assert history_order([(1, 1, TIE), (2, 2, TIE + 3 * day), (3, None, TIE + day)]) == [1, 3, 2]
    # No date, or older than every known commit: first; unknowns sharing a place by date, then id.
    assert history_order([(1, 1, TIE), (4, None, None), (3, None, TIE - day), (2, None, TIE - day)]) == [4, 2, 3, 1]
    # Nothing known: date order, then id (what a store ingested without a repository gets).
    assert history_order([(2, None, TIE), (1, None, TIE), (3, None, TIE - day)]) == [3, 1, 2]
    assert history_order([]) == []


def test_generations_match_rev_list_count_across_merges(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = write_git_history(repo, 3, date=TIE)

    def git(*args: str) -> str:
        env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        return subprocess.run(
            ["git", "-C", str(repo), *env_args, *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    git("checkout", "-q", "-b", "side", shas[0])
    git("commit", "-q", "--allow-empty", "-m", "side 1")
    git("commit", "-q", "--allow-empty", "-m", "side 2")
    git("checkout", "-q", "main")
    git("merge", "-q", "--no-ff", "--no-edit", "side")
    git("commit", "-q", "--allow-empty", "-m", "after merge")
    everything = git("rev-list", "--all").split()
    gens = gitmeta.generations(repo, [*everything, "0" * 40])
    assert set(gens) == set(everything)
    for sha in everything:
        assert gens[sha] == int(git("rev-list", "--count", sha)), sha
    assert gens[git("rev-parse", "HEAD")] == 7  # 3 + 2 side + merge + 1
    assert gitmeta.generations(tmp_path / "not-a-repo", everything) == {}


def test_downgrade_from_0003_keeps_commits_and_runs(sqlite_url: str, tmp_path: Path) -> None:
    # Dropping the column must not copy-and-recreate "commit": with foreign keys on that would cascade.
    h = write_synthetic_results(tmp_path / "results", commits=3, series=6, machine="m")
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    assert ingest_paths(engine, [h.root], progress=False, repo=None).ok
    downgrade(sqlite_url, "0002")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM run")).scalar_one() == 3
        assert conn.execute(sa.text('SELECT count(*) FROM "commit"')).scalar_one() == 3
        assert "generation" not in {c["name"] for c in sa.inspect(conn).get_columns("commit")}
    upgrade(sqlite_url)
    with engine.connect() as conn:
        assert "generation" in {c["name"] for c in sa.inspect(conn).get_columns("commit")}
    engine.dispose()


def test_0009_fills_positions_of_a_stored_history_and_downgrades_in_place(db_url: str, tmp_path: Path) -> None:
    shas = write_git_history(tmp_path / "repo", 3, date=TIE)
    h = write_synthetic_results(tmp_path / "results", commits=4, series=6, shas=[*shas, "f" * 40],
                                dates=[TIE, TIE, TIE, TIE - dt.timedelta(days=1)], machine="m")  # fmt: skip
    upgrade(db_url)
    engine = make_engine(db_url)
    assert ingest_paths(engine, [h.root], progress=False, repo=tmp_path / "repo").ok
    positions = 'SELECT sha, position FROM "commit" ORDER BY position'
    with engine.connect() as conn:
        placed = conn.execute(sa.text(positions)).all()
    assert [sha for sha, _ in placed] == ["f" * 40, *shas] and [p for _, p in placed] == [0, 1, 2, 3]
    downgrade(db_url, "0008")
    with engine.connect() as conn:
        assert "position" not in {c["name"] for c in sa.inspect(conn).get_columns("commit")}
        assert conn.execute(sa.text("SELECT count(*) FROM run")).scalar_one() == 4
    upgrade(db_url)  # 0009 places what is stored, from the generations and dates already there
    with engine.connect() as conn:
        assert conn.execute(sa.text(positions)).all() == placed
    engine.dispose()


def test_commits_left_unplaced_by_a_stopped_ingest_are_placed_by_the_next(db_url: str, tmp_path: Path) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=3, series=6, machine="m")
    engine = make_engine(db_url)
    assert ingest_paths(engine, [h.root], progress=False, repo=None).ok
    with engine.begin() as conn:  # as an ingest killed between storing its files and placing their commits
        conn.execute(sa.text('UPDATE "commit" SET position = NULL'))
    summary = ingest_paths(engine, [h.root], progress=False, repo=None)
    assert summary.ingested == 0 and summary.unchanged == 3
    with engine.connect() as conn:
        assert conn.execute(sa.text('SELECT position FROM "commit" ORDER BY position')).scalars().all() == [0, 1, 2]
    engine.dispose()
