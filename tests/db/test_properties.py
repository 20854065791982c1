"""Property-based ingest tests (hypothesis) on SQLite and PostgreSQL.

Each example writes a batch of asv results files: valid documents generated with odd but valid unicode,
every value range and re-runs of a commit; mutated documents (wrong types, missing fields, values out of
range, huge integers, deep nesting, bad text, duplicated keys, truncation); copies of good files; and
file-system faults (symlink loops, dangling links, folders and FIFOs named like results, unreadable
files, a file replaced or deleted while the ingest runs). After every ingest the store must equal what
the good files say, computed here independently of the parser, with everything stored by earlier
examples unchanged; the summary must count each kind and the exit status be 2 exactly when a file was
refused. The store lives across the examples of a test, so each example starts from the previous ones.

Examples per backend: ``MLAPERF_HYPOTHESIS_EXAMPLES`` (default 30; the CI profile uses the same).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db import ingest
from db.engine import make_engine, upgrade
from tests.db.conftest import ASV_COLUMNS, bench_row, results_doc, store_state

EXAMPLES = int(os.environ.get("MLAPERF_HYPOTHESIS_EXAMPLES", "30"))
settings.register_profile(
    "mlaperf-ingest",
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # nothing written into the repository; failures print their reproduction blob
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
_TAGS = itertools.count(1)
_READY: set[str] = set()  # stores given their schema (once per test, before its first example)

# Valid text: anything but NUL and lone surrogates (the only text the store refuses).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=10)
RANGES = {"time": (0.0, 86_400.0), "mem": (0.0, float(2**63)), "track": (None, None)}


def finite(kind: str) -> st.SearchStrategy[float]:
    lo, hi = RANGES[kind]
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@dataclass
class Batch:
    """Files of one example and what the store must gain from them."""

    root: Path
    rows: Counter = field(default_factory=Counter)  # expected result rows
    runs: Counter = field(default_factory=Counter)  # expected (machine, sha, env) runs
    names: dict[str, set[str]] = field(
        default_factory=lambda: {"commits": set(), "machines": set(), "benchmarks": set()}
    )
    contents: set[bytes] = field(default_factory=set)
    ingested: int = 0
    unchanged: int = 0
    refused: set[str] = field(default_factory=set)
    replacements: dict[str, Callable[[Path], None]] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)

    def path(self, folder: str = "d0") -> Path:
        directory = self.root / folder
        if not directory.is_dir():
            directory.mkdir(parents=True)
            (directory / "machine.json").write_text(json.dumps({"machine": "from-machine-json", "version": 1}))
        return directory / f"{next(self.counter):03d}.json"

    def good(self, data: bytes, doc: dict[str, Any], expected: list[tuple]) -> None:
        """Account for a file holding ``data`` that must be stored (or be unchanged, if seen before)."""
        if data in self.contents:
            self.unchanged += 1
            return
        self.contents.add(data)
        self.ingested += 1
        machine, sha, env = doc["params"]["machine"], doc["commit_hash"], doc["env_name"]
        self.runs[(machine, sha, env)] += 1
        self.rows.update(expected)
        self.names["commits"].add(sha)
        self.names["machines"].add(machine)
        self.names["benchmarks"].update(doc["results"])


def valid_doc(data: st.DataObject, tag: int) -> tuple[dict[str, Any], list[tuple]]:
    """A valid asv results document and the result rows the store must hold for it."""
    machine = data.draw(st.sampled_from([f"m{tag}", f"m{tag}-ü🚀"])) + data.draw(st.sampled_from(["", "\u200f\t x"]))
    sha = data.draw(st.sampled_from([f"{tag:08x}" + "a" * 32, f"{tag:08x}" + "b" * 56]))  # re-runs happen
    env = data.draw(st.sampled_from(["existing-py3.11", "virtualenv-py3.12-ü"]))
    results: dict[str, list[Any]] = {}
    expected: list[tuple] = []
    for j in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["time", "track", "mem"]))
        name = f"b{tag}.{kind}_{j}_" + data.draw(TEXT).replace(".", "·")  # a dot would change its type
        params = [
            data.draw(st.lists(TEXT.map(repr), min_size=1, max_size=3, unique=True))
            for _ in range(data.draw(st.integers(0, 2)))
        ]
        n = math.prod(len(p) for p in params)
        value = st.one_of(st.none(), st.just(math.nan), finite(kind))
        values = data.draw(st.lists(value, min_size=n, max_size=n))
        number = data.draw(st.one_of(st.none(), st.lists(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
        samples = data.draw(st.one_of(st.none(), st.lists(st.lists(finite(kind), max_size=3), min_size=n, max_size=n)))
        results[name] = bench_row(values, params, stats_number=number, samples=samples)
        names = [f"param{i + 1}" for i in range(len(params))]
        for k, combo in enumerate(itertools.product(*params)):
            key = json.dumps(dict(zip(names, combo, strict=True)), sort_keys=True)
            v = values[k]
            if v is None or math.isnan(v):
                expected.append((machine, sha, env, name, key, "failed" if v is None else "skipped", None, None, None))
                continue
            sample = None if samples is None else tuple(samples[k])
            expected.append((machine, sha, env, name, key, "ok", v, None if number is None else number[k], sample))
    date = data.draw(st.one_of(st.none(), st.integers(0, 4_102_444_799_999)))
    doc = results_doc(results, commit=sha, machine=machine, env_name=env, date=date)
    if data.draw(st.booleans()):
        doc["params"].update({"gpu_name": data.draw(TEXT), "gpu_sm_count": str(data.draw(st.integers(0, 10**30)))})
    return doc, expected


def _text_edit(doc: dict[str, Any], old: str, new: str) -> bytes:
    text = json.dumps(doc)
    assert old in text
    return text.replace(old, new, 1).encode("utf-8", "surrogatepass")


def mutated(data: st.DataObject, doc: dict[str, Any]) -> bytes:
    """``doc`` broken in one way that the store must refuse."""
    doc = json.loads(json.dumps(doc))  # a copy (NaN survives)
    how = data.draw(
        st.sampled_from(
            [
                "missing key", "wrong type", "time out of range", "huge integer", "deep nesting", "date",
                "count", "long name", "bad text", "duplicate key", "truncated", "not utf-8", "repeated param",
                "column length", "infinity",
            ]
        )
    )  # fmt: skip
    tag = doc["commit_hash"][:8]
    if how == "missing key":
        doc.pop(data.draw(st.sampled_from(["commit_hash", "env_name", "params", "result_columns", "results"])))
    elif how == "wrong type":
        key, value = data.draw(
            st.sampled_from(
                [("commit_hash", 7), ("results", []), ("params", "x"), ("result_columns", [1]), ("env_name", "")]
            )
        )
        doc[key] = value
    elif how == "time out of range":
        bad = data.draw(st.one_of(st.floats(max_value=-1e-300), st.floats(min_value=86_400.5, allow_nan=False)))
        doc["results"][f"b{tag}.time_bad"] = [[bad], []]
    elif how == "huge integer":
        doc["results"][f"b{tag}.track_big"] = [[123.0], []]
        return _text_edit(doc, "[123.0]", "[" + "9" * data.draw(st.integers(20, 6000)) + "]")
    elif how == "deep nesting":
        depth = data.draw(st.sampled_from([33, 500, 5000, 200_000]))
        where = data.draw(st.sampled_from(["env_vars", "requirements"]))
        return _text_edit(doc, f'"{where}": {{}}', f'"{where}": {{"x": ' + "[" * depth + "]" * depth + "}")
    elif how == "date":
        doc["date"] = data.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=4_102_444_800_000)))
        if abs(doc["date"]) >= 2**63:
            doc["date"] = -1
    elif how == "count":
        doc["results"][f"b{tag}.time_n"] = bench_row([1.0], [], stats_number=[data.draw(st.integers(2**31, 2**63 - 1))])
    elif how == "long name":
        field_, limit = data.draw(st.sampled_from([("benchmark", 512), ("machine", 255), ("commit_hash", 64)]))
        long = "x" * data.draw(st.integers(limit + 1, limit + 2000))
        if field_ == "benchmark":
            doc["results"][long] = [[1.0], []]
        elif field_ == "machine":
            doc["params"]["machine"] = long
        else:
            doc["commit_hash"] = long
    elif how == "bad text":
        doc["results"][f"b{tag}.time_@"] = [[1.0], []]
        return _text_edit(doc, "time_@", data.draw(st.sampled_from(["\\u0000", "\\ud800", "\\udfff"])))
    elif how == "duplicate key":
        return _text_edit(doc, '"version": 2', '"version": 2, "results": {}')
    elif how == "truncated":
        text = json.dumps(doc).encode()
        return text[: data.draw(st.integers(0, len(text) - 1))]
    elif how == "not utf-8":
        return _text_edit(doc, '"version": 2', '"version": 2, "x": "@"').replace(b"@", b"\xff\xfe")
    elif how == "repeated param":
        doc["results"][f"b{tag}.time_p"] = [[1.0, 2.0], [["'a'", "'a'"]]]
    elif how == "column length":
        doc["results"][f"b{tag}.time_c"] = [[1.0, 2.0, 3.0], [["1", "2"]]]
    elif how == "infinity":
        doc["results"][f"b{tag}.track_inf"] = [[1.0], []]
        return _text_edit(doc, "[1.0]", data.draw(st.sampled_from(["[Infinity]", "[-Infinity]", "[1e999]"])))
    return json.dumps(doc).encode()


def fault(data: st.DataObject, batch: Batch, good: tuple[dict[str, Any], list[tuple]] | None) -> None:
    """A file-system fault in the batch's folder, with its expected outcome."""
    kinds = ["symlink loop", "dangling link", "folder", "fifo", "replaced", "deleted", "truncated mid-run"]
    if os.geteuid() != 0:
        kinds.append("unreadable")
    kind = data.draw(st.sampled_from(kinds))
    path = batch.path()
    if kind == "symlink loop":
        other = path.with_name(path.stem + "-loop.json")
        os.symlink(other.name, path)
        os.symlink(path.name, other)
        batch.refused.update({str(path), str(other)})
    elif kind == "dangling link":
        os.symlink("nowhere", path)
        batch.refused.add(str(path))
    elif kind == "folder":
        path.mkdir()
        batch.refused.add(str(path))
    elif kind == "fifo":
        os.mkfifo(path)
        batch.refused.add(str(path))
    elif kind == "unreadable":
        path.write_text("{}")
        path.chmod(0)
        batch.refused.add(str(path))
    else:
        # A file that changes between the folder listing and its reading.
        path.write_text('{"placeholder": true}')
        if kind == "deleted":
            batch.replacements[str(path)] = lambda p: p.unlink()
            batch.refused.add(str(path))
        elif kind == "truncated mid-run":
            batch.replacements[str(path)] = lambda p: p.write_bytes(b'{"version": 2, "resu')
            batch.refused.add(str(path))
        elif good is not None:
            doc, expected = good
            content = json.dumps(doc).encode()
            batch.replacements[str(path)] = lambda p: p.write_bytes(content)
            batch.good(content, doc, expected)
        else:
            batch.replacements[str(path)] = lambda p: p.write_bytes(b"[]")
            batch.refused.add(str(path))


@settings(settings.get_profile("mlaperf-ingest"))
@given(data=st.data())
def test_store_equals_the_good_files(db_url: str, tmp_path: Path, data: st.DataObject) -> None:
    if db_url not in _READY:
        upgrade(db_url)
        _READY.add(db_url)
    tag = next(_TAGS)
    batch = Batch(tmp_path / f"example-{tag}" / "results")
    for _ in range(data.draw(st.integers(1, 6), label="files")):
        choice = data.draw(st.sampled_from(["good", "good", "bad", "copy", "fault"]))
        if choice == "copy" and batch.contents:
            content = data.draw(st.sampled_from(sorted(batch.contents)))
            batch.path().write_bytes(content)
            batch.unchanged += 1
        elif choice == "fault":
            fault(data, batch, valid_doc(data, tag) if data.draw(st.booleans()) else None)
        elif choice == "bad":
            path = batch.path()
            path.write_bytes(mutated(data, valid_doc(data, tag)[0]))
            batch.refused.add(str(path))
        else:
            doc, expected = valid_doc(data, tag)
            content = json.dumps(doc).encode()
            batch.path().write_bytes(content)
            batch.good(content, doc, expected)

    before = store_state(db_url)
    real_read = ingest.read_input

    def read_input(path: Path) -> bytes:
        change = batch.replacements.pop(str(path), None)
        if change is not None:
            change(path)
        return real_read(path)

    engine = make_engine(db_url)
    with mock.patch.object(ingest, "read_input", read_input):
        summary = ingest.ingest_paths(engine, [batch.root], progress=False)
    engine.dispose()
    after = store_state(db_url)

    assert not batch.replacements, "every file was read"
    assert summary.errors == [], summary.errors
    assert {path for path, _ in summary.refused} == batch.refused, summary.refused
    assert all(reason and "\n" not in reason for _, reason in summary.refused)
    assert (summary.ingested, summary.unchanged) == (batch.ingested, batch.unchanged), summary.line()
    assert summary.exit_status == (2 if batch.refused else 0)
    # The store gained exactly the good files' rows, runs and names; nothing stored earlier changed.
    assert after["rows"] - before["rows"] == batch.rows and before["rows"] - after["rows"] == Counter()
    assert after["runs"] - before["runs"] == batch.runs and before["runs"] - after["runs"] == Counter()
    for key in ("commits", "machines", "benchmarks"):
        assert after[key] - before[key] == batch.names[key] - before[key], key
        assert before[key] <= after[key], key


def test_row_columns_match_the_fixture_layout() -> None:
    """The generator writes rows in asv's column order (ASV_COLUMNS), as the parser expects by name."""
    doc = results_doc({"b.time_x": bench_row([1.0], [], stats_number=[3], samples=[[1.0]])})
    row = dict(zip(ASV_COLUMNS, doc["results"]["b.time_x"], strict=False))
    assert row["stats_number"] == [3] and row["samples"] == [[1.0]]
