"""`mlaperf compare` output formats on the seeded store: an aligned text table in a terminal (a real
pseudo-terminal), the PR markdown in a pipe, JSON on request; the same statuses as the dashboard's Compare."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIX_FROM, MLA_MACHINE, ROOT, SLOW_FROM, Seeded


def _compare(seeded: Seeded, *argv: str, tty: bool = False) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "mlaperf.cli", "compare", *argv, "--db", seeded.url, "--machine", MLA_MACHINE]
    env = {**os.environ, "COLUMNS": "160"}
    if not tty:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    rc = proc.wait(timeout=120)
    os.close(leader)
    assert proc.stderr is not None
    return rc, b"".join(chunks).decode().replace("\r\n", "\n"), proc.stderr.read().decode()


@pytest.fixture(scope="module")
def step(seeded: Seeded) -> tuple[str, str]:
    return seeded.shas[SLOW_FROM - 1][:12], seeded.shas[SLOW_FROM][:12]


def test_text_table_in_a_terminal(seeded: Seeded, step: tuple[str, str]) -> None:
    rc, out, err = _compare(seeded, *step, tty=True)
    assert rc == 1, err  # a regression
    lines = out.splitlines()
    assert lines[0].startswith(f"mlaperf compare: head {step[1]}")
    counts = r"^\d+ regressions?, 0 failed, \d+ improvements?, (\d+ untested beyond the threshold, )?\d+ unchanged"
    assert re.match(counts, lines[1]), lines[1]
    assert "<details>" not in out and "\\(" not in out and "|" not in out  # no markdown
    header = next(i for i, line in enumerate(lines) if line.startswith("status"))
    rows = [line for line in lines[header + 1:]
            if line.strip() and not line.startswith(("    ", "Not listed", "untested:"))]
    assert rows and all(r.startswith("REGRESSED") for r in rows[:3])
    # Worst first: the "change" column falls from row to row among the regressions.
    changes = [float(m.group(1)) for r in rows
               if r.startswith("REGRESSED") and (m := re.search(r"\+([\d.]+)% worse", r))]
    assert changes == sorted(changes, reverse=True) and len(changes) >= 2
    # Aligned: the ratio column ends at the same place on every row.
    ends = {r.index("x ") + 1 for r in rows if re.search(r"\d\.\d\dx ", r)}
    assert len(ends) == 1, rows[:5]
    unlisted = r"^Not listed: (\d+ untested beyond the threshold, )?\d+ unchanged.* \(--format markdown or json lists"
    assert re.search(unlisted + r" every series\)\.$", out, re.M)


def test_pipe_gets_markdown_and_formats_on_request(seeded: Seeded, step: tuple[str, str]) -> None:
    rc, out, _ = _compare(seeded, *step)
    assert rc == 1 and out.startswith("<!-- mlaperf") or "## mlaperf benchmark report" in out
    rc, text, _ = _compare(seeded, *step, "--format", "text")
    assert rc == 1 and text.startswith("mlaperf compare:")
    rc, js, _ = _compare(seeded, *step, "--format", "json")
    rows = json.loads(js)
    assert rc == 1 and any(r["status"] == "regressed" for r in rows)
    n_reg = sum(r["status"] == "regressed" for r in rows)
    assert f"{n_reg} regression" in text.splitlines()[1]
    rc, _, err = _compare(seeded, *step, "--json", "--format", "text")
    assert rc == 2 and "--format" in err


def test_compare_page_names_and_changes_are_the_clis(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """The fix (commit FIX_FROM): times down and rates (tokens/s, GB/s) up. The Compare page names every series
    and states every change as `mlaperf compare` does: a rate going up reads "+N% better", never "-N% better"."""
    from test_pages import app, goto

    base, head = seeded.shas[FIX_FROM - 1][:12], seeded.shas[FIX_FROM][:12]
    rc, text, err = _compare(seeded, base, head, "--format", "text")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("status"))
    cli, untested = {}, {}
    for line in lines[header + 1:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) in (6, 7):  # status, series, base, head, ratio, change[, p] (an untested row has no p)
            (untested if cells[0] == "untested" else cli)[cells[1]] = cells[5]
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": base, "cmp_head": head}), "compare")
    table = next(d.value for d in at.dataframe if "change" in d.value.columns)
    dash = dict(zip(table["series"], table["change"], strict=True))
    assert len(cli) >= 10 and dash == cli, (rc, err)
    # The CLI lists the largest untested changes too; the page shows them on their pill, in the same words.
    shown = list(dict.fromkeys([*table["status"].map(str.lower), "untested"]))
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": base, "cmp_head": head, "cmp_show": shown}), "compare")
    table = next(d.value for d in at.dataframe if "change" in d.value.columns)
    dash = dict(zip(table["series"], table["change"], strict=True))
    assert untested and all(dash.get(k) == v for k, v in untested.items()), (untested, dash)
    # Every rate row, unchanged ones too: up reads + and better, down - and worse (their values' own change).
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": base, "cmp_head": head,
                                                  "cmp_show": ["improved", "untested", "unchanged"]}), "compare")
    table = next(d.value for d in at.dataframe if "change" in d.value.columns)
    rates = table[table["series"].str.contains(r"\.track_(?:tokens_per_s|gbps|tflops) ", regex=True)]
    assert rates["change"].str.fullmatch(r"\+[\d.]+% better|-[\d.]+% worse|0%").all(), list(rates["change"])
    assert rates["change"].str.fullmatch(r"\+3\d% better").sum() >= 8  # the MMA kernels' rates, 1.3x up


def test_renames_and_environments_read_the_same_on_the_page_as_in_the_cli(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    """A class renamed in a module that still runs (missing at head), and head run in another asv environment: the
    page's method cells, note and warning say what `mlaperf compare` says, the removal to declare included."""
    from test_pages import app, goto

    from tests.db.conftest import bench_row, results_doc, write_results
    from tests.regressions.test_renames import AT_BASE, AT_HEAD, BASE, HEAD

    for sha, values, when, env in ((BASE, AT_BASE, 1_700_000_000_000, "existing-py3.11"),
                                   (HEAD, AT_HEAD, 1_700_001_000_000, "existing-py3.12")):
        rows = {name: bench_row([v], []) for name, v in values.items()}
        write_results(tmp_path / "r", results_doc(rows, machine="m", commit=sha, date=when, env_name=env))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "ingest", str(tmp_path / "r"), "--db", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cli = subprocess.run([sys.executable, "-m", "mlaperf.cli", "compare", BASE, HEAD, "--db", url, "--format", "text"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    note = next(line for line in cli.stdout.splitlines() if "of the missing look renamed" in line)
    at = goto(app(monkeypatch, url, machine="m", query={"cmp_base": BASE[:12], "cmp_head": HEAD[:12],
                                                        "cmp_show": ["missing", "new"]}), "compare")
    table = next(d.value for d in at.dataframe if "change" in d.value.columns)
    method = dict(zip(table["series"], table["method"], strict=True))
    assert method["bench_a.Decode.time_x"] == "renamed? bench_a.DecodeSuite.time_x", method
    assert method["bench_a.DecodeSuite.time_y"] == "renamed? from bench_a.Decode.time_y", method
    assert method["bench_a.P.time_run"] == "none", method
    (caption,) = [c.value for c in at.caption if "look renamed" in c.value]
    assert caption.replace("`", "").replace("the missing at head", "the missing") == note, (caption, note)
    (block,) = [c.value for c in at.code if c.value.startswith("removed = [")]
    assert [f"    {line}" for line in block.splitlines()] == [
        line for line in cli.stdout.splitlines() if line.startswith("    removed = [") or line.startswith('      "')
        or line == "    ]"], (block, cli.stdout)
    (warning,) = [w.value for w in at.warning if "asv environment" in w.value]
    assert f"mlaperf compare: warning: {warning}" in cli.stderr.splitlines(), (warning, cli.stderr)
