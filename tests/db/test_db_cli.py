"""`mlaperf ingest` and `mlaperf db ...` (db.store_commands, run through mlaperf.cli): help, defaults, exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import mlaperf.cli
from db import store_commands
from db.engine import head_revision
from tests.db.conftest import bench_row, results_doc, run_cli, write_results


def test_register_adds_commands_with_help(capsys: pytest.CaptureFixture) -> None:
    parser = argparse.ArgumentParser(prog="mlaperf")
    store_commands.register(parser.add_subparsers(dest="command"))
    for argv in (
        ["ingest", "--help"],
        ["db", "--help"],
        ["db", "upgrade", "--help"],
        ["db", "current", "--help"],
    ):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        assert info.value.code == 0
    assert "--db URL" in capsys.readouterr().out


def test_defaults_work_in_a_fresh_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.delenv("MLAPERF_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "db", "current")
    assert code == 0 and "no database" in out
    root = tmp_path / ".asv" / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    code, out, _ = run_cli(capsys, "ingest")  # default path .asv/results, default database
    assert code == 0 and "ingested 1 of 1 file (1 result," in out
    assert (tmp_path / ".mlaperf" / "mlaperf.sqlite").is_file()
    code, out, _ = run_cli(capsys, "db", "current")
    assert code == 0 and f"{head_revision()} (up to date)" in out


def test_exit_codes_and_messages(tmp_path: Path, capsys: pytest.CaptureFixture, sqlite_url: str) -> None:
    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    bad = write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, commit="b" * 40))
    bad.write_text(bad.read_text()[:50])

    code, out, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(root))
    assert code == 2
    assert f"REFUSED {bad}: invalid JSON (truncated?)" in err
    assert "ingested 1 of 2 files" in out and "1 refused" in out and bad.name in out

    code, _, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(tmp_path / "missing"))
    assert code == 2 and "no such file or directory" in err
    code, _, err = run_cli(capsys, "ingest", "--db", "nosuch://x", str(root))
    assert code == 2 and "invalid database URL 'nosuch://x'" in err
    with pytest.raises(SystemExit) as info:
        mlaperf.cli.main(["ingest", "--no-such-flag"])
    assert info.value.code == 2
    code, _, _ = run_cli(capsys, "db")
    assert code == 2


def test_a_crash_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    """The store's commands get mlaperf's one exit-status rule (settings.exits.dispatch), not one of their own."""

    def crash(*_args: object, **_kwargs: object) -> None:
        raise KeyError("a bug")

    monkeypatch.delenv("MLAPERF_DEBUG", raising=False)
    monkeypatch.setattr(store_commands, "ingest_paths", crash)
    code, _, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(tmp_path))
    assert code == 3 and err == "mlaperf: internal error: KeyError: 'a bug'\n"


def test_old_schema_is_a_clear_error_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture, sqlite_url: str
) -> None:
    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    assert run_cli(capsys, "db", "upgrade", "0001", "--db", sqlite_url)[0] == 0
    code, out, err = run_cli(capsys, "ingest", "--db", sqlite_url, str(root))
    assert code == 2 and "schema revision 0001" in err and "mlaperf db upgrade --db" in err
    code, out, _ = run_cli(capsys, "db", "current", "--db", sqlite_url)
    assert f"0001 (needs upgrade to {head_revision()})" in out
    code, out, _ = run_cli(capsys, "db", "upgrade", "--db", sqlite_url)
    assert code == 0 and f"schema revision {head_revision()}" in out
    code, out, _ = run_cli(capsys, "ingest", "--db", sqlite_url, "--quiet", str(root))
    assert code == 0 and out == ""
    code, out, _ = run_cli(capsys, "db", "downgrade", "0001", "--db", sqlite_url, "--yes")
    assert code == 0 and "schema revision 0001" in out


def test_a_downgrade_that_drops_data_needs_yes(tmp_path: Path, capsys: pytest.CaptureFixture, sqlite_url: str) -> None:
    """`db downgrade base` dropped every table without a word; now it is refused (exit 2, naming --yes) and
    the store keeps its results; with --yes it drops them and says the store is empty, not 'revision None'."""
    root = tmp_path / "results"
    write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}))
    assert run_cli(capsys, "ingest", "--db", sqlite_url, "--quiet", str(root))[0] == 0
    for target in ("base", "0001", "-1"):
        code, out, err = run_cli(capsys, "db", "downgrade", target, "--db", sqlite_url)
        assert code == 2 and out == "" and "pass --yes to do it" in err
    assert "drops every table of" in run_cli(capsys, "db", "downgrade", "base", "--db", sqlite_url)[2]
    code, out, _ = run_cli(capsys, "db", "current", "--db", sqlite_url)
    assert f"{head_revision()} (up to date)" in out  # nothing was dropped
    code, out, _ = run_cli(capsys, "db", "downgrade", "base", "--db", sqlite_url, "--yes")
    assert code == 0 and out.strip().endswith("is empty (base): no mlaperf tables") and "None" not in out
    code, out, _ = run_cli(capsys, "db", "downgrade", "base", "--db", sqlite_url)  # nothing left to drop
    assert code == 0 and "empty (base)" in out


def test_the_summary_names_refused_files_as_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                    sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """'..., in 0.03 s: bad.json into sqlite:///...' read as if bad.json was stored; a missing default path
    read as a refused file named 'results' (and created the store)."""
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, out, _ = run_cli(capsys, "ingest", "--db", sqlite_url, str(bad))
    assert code == 2 and "ingested 0 of 1 file (0 results" in out
    assert out.rstrip().endswith(f" into {sqlite_url}; refused: bad.json") and ": bad.json into" not in out
    monkeypatch.chdir(tmp_path)
    fresh = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    code, out, err = run_cli(capsys, "ingest", "--db", fresh)
    assert code == 2 and out == ""
    assert err.startswith("mlaperf: error: no asv results at .asv/results (pass PATH")
    assert not (tmp_path / "fresh.sqlite").exists()
