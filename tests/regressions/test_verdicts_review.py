"""A reviewer's adversarial histories, as asv writes them (asv's own ``Results``), ingested for real and
detected night by night and with ``--full``: rate units (TFLOPS falling is the regression), an alert whose
fix lands beyond the nightly's lookback, a version bump that continues a regressed level, a machine-wide
one-run hiccup on the commit of a real step, and a step at a new version's second run when the version
change itself moved the level."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult
from sqlalchemy.engine import Engine

from db.engine import make_engine
from mlaperf.cli import main

Ingest = Callable[[Engine, list[Path]], None]
Values = dict[str, float | None]
START = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)


def _entry(name: str, unit: str | None, version: str) -> dict:
    kind = name.rsplit(".", 1)[1].split("_", 1)[0]
    return {"name": name, "type": kind, "unit": unit or ("seconds" if kind == "time" else "unit"),
            "param_names": [], "params": [], "version": version, "number": 0, "repeat": 0,
            "min_run_count": 2, "rounds": 2, "sample_time": 0.01, "warmup_time": -1}  # fmt: skip


def write_history(
    root: Path, commits: list[Values], *, units: dict[str, str] | None = None, bumps: dict[str, int] | None = None,
    machine: str = "m1", shas_from: int = 0, listed: dict[int, list[str]] | None = None,
) -> list[Path]:
    """One asv results folder per commit (one hour apart) of unparameterized benchmarks on ``machine`` (another
    machine written into the same ``root`` shares the folders); ``bumps``: benchmark -> the commit from which
    it has a new asv version. None: a failed run. ``shas_from``: the number in the first commit's sha (another
    machine's commits other shas in the same folders). Each folder's benchmarks.json lists what its commit
    measured and ``listed``'s names for it (an ``asv run --bench`` subset: the suite listed, a part measured)."""
    folders = []
    for i, values in enumerate(commits):
        folder = root / f"c{i:03d}"
        params = {"machine": machine, "arch": "x86_64", "cpu": "c", "num_cpu": "16", "os": "Linux", "ram": "1"}
        asv_util.write_json(str(folder / machine / "machine.json"), params, api_version=1)
        date = START + dt.timedelta(hours=i)
        sha = f"{i + shas_from:04d}" + "ab" * 18
        res = Results({**params, "python": "3.11"}, {}, sha, asv_util.datetime_to_js_timestamp(date), "3.11",
                      "py", {})  # fmt: skip
        entries = {}
        for name, v in values.items():
            version = ("2" if i >= (bumps or {}).get(name, len(commits)) else "1") * 64
            e = entries[name] = _entry(name, (units or {}).get(name), version)
            samples = None if v is None or e["type"] != "time" else [v * (1 + 0.001 * k) for k in (-1, 0, 1)]
            result = BenchmarkResult([v], [samples], [1 if samples else None], 0 if v is not None else 1, "", None)
            res.add_result(e, result, started_at=date, duration=0.5, record_samples=True)
        res.save(str(folder))
        for name in (listed or {}).get(i, []):
            entries.setdefault(name, _entry(name, (units or {}).get(name), "1" * 64))
        asv_util.write_json(str(folder / "benchmarks.json"), entries, api_version=2)
        folders.append(folder)
    return folders


def noisy(seed: int) -> Callable[[], float]:
    rng = random.Random(seed)
    return lambda: rng.gauss(1.0, 0.006)


def detect(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    capsys.readouterr()
    rc = main(["detect", "--db", url, "--json", "--all", *extra])
    assert rc in (0, 1)
    return json.loads(capsys.readouterr().out)


def alerts(doc: dict) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(benchmark, commit index) -> (status, close reason) of every alert of a ``detect --json`` document."""
    return {(r["benchmark"], int(r["commit"][:4])): (r["status"], r["close_reason"]) for r in doc["regressions"]}


def replay(
    tmp_path: Path, folders: list[Path], ingest: Ingest, capsys: pytest.CaptureFixture[str], start: int, *extra: str
) -> tuple[dict, dict, dict[int, dict]]:
    """The nightly (ingest and incremental detect per commit from ``start``) and ``--full`` on another store:
    the nightly's last document, ``--full``'s, and the nightly's of each night (by its newest commit)."""
    nightly, full = f"sqlite:///{tmp_path / 'nightly.sqlite'}", f"sqlite:///{tmp_path / 'full.sqlite'}"
    for url in (nightly, full):
        main(["db", "upgrade", "--db", url])
    ingest(make_engine(nightly), folders[:start])
    nights = {start - 1: detect(nightly, capsys, *extra)}
    for i, folder in enumerate(folders[start:], start=start):
        ingest(make_engine(nightly), [folder])
        nights[i] = detect(nightly, capsys, *extra)
    ingest(make_engine(full), folders)
    return nights[len(folders) - 1], detect(full, capsys, "--full", *extra), nights


# --- 1. rates in TFLOPS, Gbps, qps: a drop is the regression ------------------------------------------------


def test_a_drop_in_tflops_is_the_regression_and_compare_says_so(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """One kernel 25% more TFLOPS (a gain), one 20% fewer TFLOPS (the loss), a qps loss in a unit-less
    ``track_qps`` and a Gbps gain, all from commit 30 on."""
    n = noisy(5)
    units = {"rate.Mma.track_tflops": "TFLOPS", "rate.Simt.track_tflops": "TFLOPS", "rate.Net.track_link": "Gbps"}
    commits: list[Values] = [
        {"rate.Mma.track_tflops": 500 * n() * (1.25 if i >= 30 else 1),
         "rate.Simt.track_tflops": 50 * n() / (1.25 if i >= 30 else 1),
         "rate.Srv.track_qps": 1e4 * n() / (1.25 if i >= 30 else 1),
         "rate.Net.track_link": 100 * n() * (1.25 if i >= 30 else 1)}
        for i in range(40)
    ]  # fmt: skip
    folders = write_history(tmp_path / "r", commits, units=units)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    main(["db", "upgrade", "--db", url])
    ingest(make_engine(url), folders)
    doc = detect(url, capsys, "--full")
    assert alerts(doc) == {("rate.Simt.track_tflops", 30): ("new", None), ("rate.Srv.track_qps", 30): ("new", None)}
    assert {r["direction"] for r in doc["regressions"]} == {"down_is_worse"}
    capsys.readouterr()
    main(["compare", "0029" + "ab" * 18, "0039" + "ab" * 18, "--db", url, "--json"])
    status = {r["benchmark"]: r["status"] for r in json.loads(capsys.readouterr().out)}
    assert status == {"rate.Simt.track_tflops": "regressed", "rate.Srv.track_qps": "regressed",
                      "rate.Mma.track_tflops": "improved", "rate.Net.track_link": "improved"}  # fmt: skip
    main(["compare", "0029" + "ab" * 18, "0039" + "ab" * 18, "--db", url, "--format", "text"])
    text = capsys.readouterr().out
    (simt,) = [line for line in text.splitlines() if "Simt" in line]
    (mma,) = [line for line in text.splitlines() if "Mma" in line]
    assert "worse" in simt and "better" in mma, text


# --- 2. a fix that lands beyond the nightly's lookback ------------------------------------------------------


def test_the_nightly_sees_a_fix_beyond_its_lookback(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """+20% at commit 5, back at commit 35 (30 commits later) with ``--lookback 20``: the nightly judges the
    open alert over a window reaching back to it and closes it where ``--full`` does."""
    n = noisy(9)
    commits: list[Values] = [{"lb.A.time_a": 1e-3 * n() * (1.2 if 5 <= i < 35 else 1), "lb.B.time_b": 1e-3 * n()}
                             for i in range(50)]  # fmt: skip
    folders = write_history(tmp_path / "r", commits)
    nightly, full, _ = replay(tmp_path, folders, ingest, capsys, 30, "--lookback", "20")
    assert alerts(full) == {("lb.A.time_a", 5): ("fixed", "returned")}
    assert alerts(nightly) == alerts(full)
    (closed,) = {r["closed_at"][:4] for r in [*nightly["regressions"], *full["regressions"]]}
    assert closed == "0035"


def test_old_alerts_of_two_machines_reach_back_in_one_night(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same history on two machines with commits of their own, each with an alert older than ``--lookback
    20``, both reaching back in the same nights: each closes where ``--full`` closes it."""
    n = noisy(10)
    for machine, shas_from in (("m1", 0), ("m2", 100)):  # each machine its own commits, a night each of both
        commits: list[Values] = [{"lb.A.time_a": 1e-3 * n() * (1.2 if 5 <= i < 35 else 1), "lb.B.time_b": 1e-3 * n()}
                                 for i in range(50)]  # fmt: skip
        folders = write_history(tmp_path / "r", commits, machine=machine, shas_from=shas_from)
    nightly, full, _ = replay(tmp_path, folders, ingest, capsys, 30, "--lookback", "20")
    machines = {(r["machine"], r["status"], r["closed_at"][:4]) for r in nightly["regressions"]}
    assert machines == {("m1", "fixed", "0035"), ("m2", "fixed", "0135")}
    assert alerts(nightly) == alerts(full)


# --- 3. a version bump that continues a regressed level --------------------------------------------------------


def test_a_version_bump_at_the_regressed_level_keeps_the_alert_open(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """+20% at commit 18 in three benchmarks, each a new asv version from 25: ``stays`` keeps the slow level
    (the alert is carried into the new version, still open), ``fixed`` comes back at 32 in the new version
    (the carried alert is fixed there), ``moved``'s new version starts at another level (not joinable:
    retired at 25, as before)."""
    n = noisy(1)
    commits: list[Values] = [
        {"bv.K.time_stays": 3e-3 * n() * (1.2 if i >= 18 else 1),
         "bv.K.time_fixed": 2e-3 * n() * (1.2 if 18 <= i < 32 else 1),
         "bv.K.time_moved": 1e-3 * n() * (1.2 if i >= 18 else 1) * (1.5 if i >= 25 else 1)}
        for i in range(40)
    ]  # fmt: skip
    folders = write_history(tmp_path / "r", commits, bumps=dict.fromkeys(commits[0], 25))
    nightly, full, _ = replay(tmp_path, folders, ingest, capsys, 24)
    assert alerts(full) == {("bv.K.time_stays", 18): ("new", None), ("bv.K.time_fixed", 18): ("fixed", "returned"),
                            ("bv.K.time_moved", 18): ("retired", "segment_ended")}  # fmt: skip
    assert alerts(nightly) == alerts(full)
    closed = {r["benchmark"]: r["closed_at"] and r["closed_at"][:4] for r in full["regressions"]}
    assert closed == {"bv.K.time_stays": None, "bv.K.time_fixed": "0032", "bv.K.time_moved": "0025"}


# --- 4. a machine-wide one-run hiccup on the commit of a real step ---------------------------------------------


def test_transient_members_do_not_make_a_group_machine_wide(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """All 8 series of the machine 30% worse at commit 40 for that one run (the nightly sees it as its newest
    run and flags all 8), 3 of them also 20% worse from 40 on for good: once the other 5 are transient, the
    group holds 3 real steps of 8 series measured, not most of the machine, as ``--full`` says."""
    n = noisy(3)
    names = [f"hic.K{k}.time_x" for k in range(5)] + [f"hic.R{k}.track_tok" for k in range(3)]
    commits: list[Values] = []
    for i in range(46):
        values: Values = {}
        for k, name in enumerate(names):
            worse = (1.3 if i == 40 else 1.0) * (1.2 if k in (0, 1, 5) and i >= 40 else 1.0)
            values[name] = 1e-3 * (k + 1) * n() * worse if "time" in name else 1e5 * (k + 1) * n() / worse
        commits.append(values)
    folders = write_history(tmp_path / "r", commits, units={name: "tokens/s" for name in names[5:]})
    nightly, full, _ = replay(tmp_path, folders, ingest, capsys, 39)
    real = {("hic.K0.time_x", 40), ("hic.K1.time_x", 40), ("hic.R0.track_tok", 40)}
    assert {k for k, (st, _r) in alerts(nightly).items() if st == "new"} == set(alerts(full)) == real
    assert {st for k, (st, _r) in alerts(nightly).items() if k not in real} == {"transient"}
    (group,) = nightly["groups"]
    (group_full,) = full["groups"]
    assert not group["machine_wide"] and not group_full["machine_wide"] and group_full["kind"] == "series"
    assert group["kind"] != "machine-wide" and (group["size"], group["open"]) == (8, 3)


# --- 5. a step at a new version's second run, when the version change moved the level ------------------------


def test_a_step_at_the_second_run_of_a_version_that_moved_the_level(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new asv version from commit 25 in three benchmarks: ``moved`` 6% faster with it (beyond the join
    tolerance) and 20% slower from 26, its second run (flagged at 26, suspect the first night, new the next);
    ``outlier``'s first run of the new version 10% fast, then back at the old level (no alert); ``level``
    30% slower with the version and flat after it (no alert)."""
    n = noisy(11)
    commits: list[Values] = [
        {"vo.K.time_moved": 1e-3 * n() * (0.94 if i >= 25 else 1) * (1.2 if i >= 26 else 1),
         "vo.K.time_outlier": 2e-3 * n() * (0.9 if i == 25 else 1),
         "vo.K.time_level": 3e-3 * n() * (1.3 if i >= 25 else 1)}
        for i in range(40)
    ]  # fmt: skip
    folders = write_history(tmp_path / "r", commits, bumps=dict.fromkeys(commits[0], 25))
    nightly, full, nights = replay(tmp_path, folders, ingest, capsys, 25)
    assert alerts(nights[25]) == {}
    assert alerts(nights[26]) == {("vo.K.time_moved", 26): ("suspect", None)}
    assert alerts(nights[27]) == alerts(nightly) == alerts(full) == {("vo.K.time_moved", 26): ("new", None)}
    (reg,) = full["regressions"]
    assert reg["parent"][:4] == "0025" and reg["ratio"] == pytest.approx(1.2, rel=0.03)


def test_a_step_at_a_versions_second_run_that_goes_away_is_closed(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """``back``: the version of commit 25 runs 6% faster, 26 is 20% slower (the nightly flags it, suspect), and
    from 27 the runs are back at 25's level. ``--full`` flags nothing; the nightly's suspect, at the version's
    second run, must be judged again (it once never was: only alerts with two runs before them were) and close."""
    n = noisy(12)
    commits: list[Values] = [
        {"vo.K.time_back": 1e-3 * n() * (0.94 if i >= 25 else 1) * (1.2 if i == 26 else 1)} for i in range(36)
    ]
    folders = write_history(tmp_path / "r", commits, bumps=dict.fromkeys(commits[0], 25))
    nightly, full, nights = replay(tmp_path, folders, ingest, capsys, 25)
    assert alerts(nights[26]) == {("vo.K.time_back", 26): ("suspect", None)}
    assert alerts(full) == {}
    assert alerts(nightly) == {("vo.K.time_back", 26): ("transient", "refuted")}
