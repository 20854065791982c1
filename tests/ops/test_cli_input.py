"""Input a person gets wrong on the command line is named with what was meant: a store path without its
``sqlite:///``, a --bench that is not a regular expression, a commit range written backwards (``mlaperf run``'s
RANGE, resolved by ``mlaperf.run_commits``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mlaperf.cli import main
from mlaperf.run_commits import RunError, resolve_specs


def test_a_bare_path_as_db_is_answered_with_its_sqlite_url(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    assert main(["detect", "--db", str(path)]) == 2
    assert f"sqlite:///{path}" in capsys.readouterr().err and not path.exists()


def test_bench_must_be_a_regular_expression(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--dry-run", "--bench", "time_(decode", "HEAD"])
    assert exc.value.code == 2 and "--bench: not a regular expression: 'time_(decode'" in capsys.readouterr().err


def test_a_reversed_range_is_named(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(3):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
    with pytest.raises(RunError, match=r"RANGE 'HEAD\.\.HEAD~2' has no commits: its ends look reversed "
                                       r"\(HEAD~2\.\.HEAD has 2\)"):  # fmt: skip
        resolve_specs(repo, ["HEAD..HEAD~2"])
    assert resolve_specs(repo, ["HEAD..HEAD"]) == []  # empty, not reversed: nothing to do
    assert len(resolve_specs(repo, ["HEAD~2..HEAD"])) == 2
