"""``mlaperf dashboard`` command line: help, URL checks before starting, port checks."""

from __future__ import annotations

import argparse
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Seeded

from dashboard import serve, store_check


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mlaperf")
    serve.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_register_defaults() -> None:
    args = parse(["dashboard"])
    assert args.func is serve.handle
    assert (args.db, args.port, args.host, args.writable) == (None, 8501, "127.0.0.1", False)


def test_help_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "dashboard.serve", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    for flag in ("--db", "--port", "--host", "--writable", "--repo-url"):
        assert flag in out.stdout


@pytest.mark.parametrize(
    ("url", "message"),
    [("not a url", "is not a database URL"), ("nosuchdb://x/y", "unknown database driver")],
)
def test_bad_url_fails_before_starting(url: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.handle(parse(["dashboard", "--db", url])) == 2
    err = capsys.readouterr().err
    assert message in err and "error" in err


def test_unreachable_postgres_fails_before_starting(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://nobody:secret@127.0.0.1:{port}/none?connect_timeout=2"
    assert serve.handle(parse(["dashboard", "--db", url])) == 2
    err = capsys.readouterr().err
    assert "cannot read the store" in err and "secret" not in err  # password masked


def test_newer_schema_is_reported(tmp_path: Path, seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "future.sqlite"
    db.write_bytes(seeded.path.read_bytes())
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    assert serve.handle(parse(["dashboard", "--db", f"sqlite:///{db}"])) == 2
    assert "schema revision ffffffffffff" in capsys.readouterr().err


def test_port_in_use(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert serve.handle(parse(["dashboard", "--db", seeded.url, "--port", str(port)])) == 2
    assert "already in use" in capsys.readouterr().err


@pytest.mark.parametrize(("host", "words"), [
    ("999.1.1.1", "--host '999.1.1.1' is not an address or a host name"),
    ("192.0.2.1", "--host 192.0.2.1 is not an address of this machine"),  # TEST-NET-1: no host has it
])
def test_bad_host_is_named_not_in_use(host: str, words: str, seeded: Seeded,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    for port in ("0", "8765"):
        assert serve.handle(parse(["dashboard", "--db", seeded.url, "--host", host, "--port", port])) == 2
        err = capsys.readouterr().err
        assert words in err and "already in use" not in err


def test_unknown_machine_is_refused(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.handle(parse(["dashboard", "--db", seeded.url, "--machine", "bogus"])) == 2
    err = capsys.readouterr().err
    assert "--machine: no machine named 'bogus' (known: " in err and "h200-sxm" in err


def test_bad_port(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.handle(parse(["dashboard", "--db", seeded.url, "--port", "70000"])) == 2
    assert "--port 70000" in capsys.readouterr().err


def test_store_states(tmp_path: Path, seeded: Seeded, empty_store: str) -> None:
    assert store_check.check(seeded.url).state == "ok"
    assert store_check.check(empty_store).state == "empty"
    assert store_check.check(f"sqlite:///{tmp_path / 'missing.sqlite'}").state == "missing"
    blank = tmp_path / "blank.sqlite"
    sqlite3.connect(blank).close()  # a file with no mlaperf tables is an empty store, not an error
    assert store_check.check(f"sqlite:///{blank}").state == "empty"


def test_relative_sqlite_url_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert serve.absolute_url("sqlite:///.mlaperf/mlaperf.sqlite") == \
        f"sqlite:///{tmp_path.resolve()}/.mlaperf/mlaperf.sqlite"
    assert serve.absolute_url("sqlite:////abs/x.sqlite") == "sqlite:////abs/x.sqlite"
    assert serve.absolute_url("postgresql+psycopg://u:p@h/db") == "postgresql+psycopg://u:p@h/db"


def test_streamlit_command_is_headless_on_host() -> None:
    cmd = serve.streamlit_command("127.0.0.1", 9999)
    # This Streamlit has st.App: the app runs in it, behind the page HTML's backend hint (dashboard.asgi).
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(serve.ASGI_APP)
    opts = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert opts["--server.headless"] == "true"
    assert opts["--server.address"] == "127.0.0.1" and opts["--server.port"] == "9999"
    assert opts["--browser.gatherUsageStats"] == "false"
    # No full garbage collection after every run (it held the GIL on every page load); an option this
    # Streamlit knows, so a renamed one fails here rather than being ignored.
    from streamlit import config

    assert opts["--runner.postScriptGC"] == "false" and config.get_option("runner.postScriptGC") is not None


def test_wait_serving_gives_up_when_the_server_exits() -> None:
    """The browser tools' start-up wait stops at once when the server process has died (no 90 s wait)."""
    from dashboard.served import wait_serving

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    base = f"http://127.0.0.1:{serve.free_port('127.0.0.1')}"
    with pytest.raises(RuntimeError, match=r"trivial app at http://127\.0\.0\.1:\d+ not serving \(exit 0\)"):
        wait_serving(base, proc, "trivial app", timeout=60)
