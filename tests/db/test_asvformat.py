"""asv results parsing, checked against asv's own loader and on synthetic edge cases."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from asv.results import Results

from db.asvformat import (
    RESULT_FIELDS,
    AsvFormatError,
    find_result_files,
    parse_benchmarks_json,
    parse_results,
)
from tests.db.conftest import ASV_COLUMNS, bench_row, results_doc

F = {name: i for i, name in enumerate(RESULT_FIELDS)}


def _rows(parsed, bench):
    group = next(g for g in parsed.groups if g.benchmark == bench)
    return [dict(zip(RESULT_FIELDS, r, strict=True)) for r in group.rows]


def test_matches_asv_loader_on_real_files(openblas: Path) -> None:
    """Every value, stat and parameter combination agrees with asv.results.Results.load."""
    benchmarks = parse_benchmarks_json((openblas / "benchmarks.json").read_bytes())
    files = [f for f in find_result_files([openblas])]
    assert len(files) == 269
    for file in files[::7]:
        parsed = parse_results(file.path.read_bytes(), benchmarks=benchmarks)
        asv = Results.load(str(file.path))
        assert parsed.commit_hash == asv.commit_hash
        for group in parsed.groups:
            params = asv._benchmark_params[group.benchmark]
            values = asv.get_result_value(group.benchmark, params)
            stats = asv.get_result_stats(group.benchmark, params)
            combos = list(itertools.product(*params))
            assert len(group.rows) == len(combos) == len(values)
            names = benchmarks.get(group.benchmark, {}).get("param_names")
            for row, combo, value, stat in zip(group.rows, combos, values, stats, strict=True):
                rec = dict(zip(RESULT_FIELDS, row, strict=True))
                assert list(rec["params"].values()) == list(combo)
                if names and len(names) == len(combo):
                    assert list(rec["params"]) == names
                assert rec["params_key"] == json.dumps(rec["params"], sort_keys=True)
                assert rec["value"] == value
                assert rec["q_25"] == (stat or {}).get("q_25")
                assert rec["number"] == (stat or {}).get("number")


def test_columns_read_by_name_not_position() -> None:
    """The same data with result_columns in another order parses to the same rows."""
    row = bench_row([1.0, 2.0], [["1", "2"]], version="v1", stats_q_25=[0.9, 1.9], samples=[[1.0], [2.0]])
    doc = results_doc({"b.time_x": row})
    order = list(reversed(ASV_COLUMNS))
    full = dict(zip(ASV_COLUMNS, row + [None] * (len(ASV_COLUMNS) - len(row)), strict=True))
    shuffled = results_doc({"b.time_x": [full[c] for c in order]}, columns=order)
    a = parse_results(json.dumps(doc).encode())
    b = parse_results(json.dumps(shuffled).encode())
    assert _rows(a, "b.time_x") == _rows(b, "b.time_x")
    assert _rows(a, "b.time_x")[1]["q_25"] == 1.9


def test_product_order_and_param_names() -> None:
    params = [["'simt'", "'mma'"], ["1", "64"], ["128", "512"]]
    values = [float(i) for i in range(8)]
    doc = results_doc({"bench_decode.SparseDecode.time_decode": bench_row(values, params)})
    names = {"bench_decode.SparseDecode.time_decode": {"param_names": ["impl", "concurrency", "topk"]}}
    rows = _rows(parse_results(json.dumps(doc).encode(), benchmarks=names), "bench_decode.SparseDecode.time_decode")
    for row, combo, value in zip(rows, itertools.product(*params), values, strict=True):
        assert row["params"] == dict(zip(["impl", "concurrency", "topk"], combo, strict=True))
        assert row["value"] == value
    assert rows[5]["params"] == {"impl": "'mma'", "concurrency": "1", "topk": "512"}


def test_failed_skipped_missing_stats_and_unparameterized() -> None:
    doc = results_doc(
        {
            "s.time_mixed": bench_row(
                [1.5, None, math.nan],
                [["1", "2", "3"]],
                stats_ci_99_a=[1.0, None, None],
                stats_number=[10, None, None],
                samples=[[1.4, 1.6], None, None],
            ),
            "s.time_all_failed": bench_row(None, [["'a'", "'b'"]]),
            "s.track_plain": [[42.0], []],
            "s.track_scalar": [7.0],
            "s.time_no_stats": bench_row([3.0], []),
        }
    )
    parsed = parse_results(json.dumps(doc).encode())
    mixed = _rows(parsed, "s.time_mixed")
    assert [r["status"] for r in mixed] == ["ok", "failed", "skipped"]
    assert mixed[0]["value"] == 1.5 and mixed[0]["ci_99_a"] == 1.0 and mixed[0]["number"] == 10
    assert mixed[0]["samples"] == [1.4, 1.6]
    assert mixed[1]["value"] is None and mixed[2]["value"] is None
    assert [r["status"] for r in _rows(parsed, "s.time_all_failed")] == ["failed", "failed"]
    plain = _rows(parsed, "s.track_plain")
    assert len(plain) == 1 and plain[0]["params"] == {} and plain[0]["params_key"] == "{}"
    assert plain[0]["value"] == 42.0
    assert _rows(parsed, "s.track_scalar")[0]["value"] == 7.0
    no_stats = _rows(parsed, "s.time_no_stats")[0]
    assert no_stats["q_25"] is None and no_stats["samples"] is None and no_stats["number"] is None


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(version=1), "unsupported asv results format version 1"),
        (lambda d: d.pop("version"), "no 'version' key"),
        (lambda d: d.pop("result_columns"), "missing key 'result_columns'"),
        (lambda d: d.update(result_columns=["params"]), "no 'result' column"),
        (lambda d: d.update(results=[]), "'results' must be an object"),
        (lambda d: d["results"].update({"b.time_x": [[1.0, 2.0, 3.0], [["1", "2"]]]}), "3 entries for 2"),
        (lambda d: d["results"].update({"b.time_x": [["fast"], []]}), "not a number"),
        (lambda d: d.update(date="yesterday"), "not a timestamp"),
    ],
)
def test_bad_files_give_reasons(mutate, reason: str) -> None:
    doc = results_doc({"b.time_x": bench_row([1.0], [])})
    mutate(doc)
    with pytest.raises(AsvFormatError, match=reason):
        parse_results(json.dumps(doc).encode())


def test_truncated_and_non_json() -> None:
    data = json.dumps(results_doc({"b.time_x": bench_row([1.0], [])})).encode()
    with pytest.raises(AsvFormatError, match=r"invalid JSON \(truncated\?\)"):
        parse_results(data[: len(data) // 2])
    with pytest.raises(AsvFormatError, match="must hold a JSON object"):
        parse_results(b"[1, 2]")
    with pytest.raises(AsvFormatError, match="not UTF-8"):
        parse_results(b'{"a": "\xff"}')


def test_find_result_files(tmp_path: Path, openblas: Path) -> None:
    assert len(find_result_files([openblas])) == 269
    machine_dir = openblas / "gha-aws-skylake"
    files = find_result_files([machine_dir])
    assert len(files) == 92 and all(f.results_dir == openblas for f in files)
    one = next(machine_dir.glob("0*.json"))
    assert [f.path for f in find_result_files([one, machine_dir / "machine.json"])] == [one]
    # Overlapping arguments are deduplicated.
    assert len(find_result_files([machine_dir, one])) == 92
    with pytest.raises(FileNotFoundError, match="nope"):
        find_result_files([tmp_path / "nope"])
    with pytest.raises(ValueError, match="not an asv results directory"):
        find_result_files([tmp_path])


def test_machine_folders_without_machine_json(tmp_path: Path, openblas: Path) -> None:
    """A results folder may lack a machine's machine.json (the copies of fastcan's and AdirondaxProject's results
    a review fetched had none for most folders): such a folder was skipped without a word beside one that has it,
    and a results directory where none has it was refused. Under a results directory (benchmarks.json) a folder of
    results files is a machine's; so is a folder of results files named alone."""
    import shutil

    root = tmp_path / "results"
    root.mkdir()
    shutil.copy(openblas / "benchmarks.json", root)
    for machine in ("gha-aws-skylake", "gha-aws-graviton"):
        (root / machine).mkdir()
        for f in [*sorted((openblas / machine).glob("[0-9a-f]*.json"))[:4], openblas / machine / "machine.json"]:
            shutil.copy(f, root / machine)
    (root / "gha-aws-graviton" / "machine.json").unlink()  # one folder with it, one without
    (root / "notes").mkdir()  # a folder without results is no machine's
    (root / "notes" / "README").write_text("x")
    files = find_result_files([root])
    assert len(files) == 8 and all(f.results_dir == root for f in files)
    (root / "gha-aws-skylake" / "machine.json").unlink()
    assert len(find_result_files([root])) == 8
    alone = find_result_files([root / "gha-aws-graviton"])
    assert len(alone) == 4 and all(f.results_dir == root for f in alone)
    with pytest.raises(ValueError, match="not an asv results directory"):
        find_result_files([root / "notes"])
    (root / "benchmarks.json").unlink()  # machines' folders without machine.json, and no suite above them: said so
    with pytest.raises(ValueError, match=r"subdirectories \(gha-aws-graviton, gha-aws-skylake\) hold results files"):
        find_result_files([root])
