"""The trusted renderer: a hostile report.json (what a pull request's code can write) cannot put markup,
mentions, links, images or bidi controls into the comment, nor choose the status; bad data gives the
fixed `error` status. `python -m regressions.pr_render` runs as a subprocess, as the workflow runs it,
and GitHub's own renderer (cmark-gfm) reads the comment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from scratch import ROOT

from db import limits
from regressions.pr_render import INVALID
from regressions.pr_schema import MAX_FILE_BYTES, MAX_ROWS
from regressions.report import MARKER
from settings.pr_contract import CONTEXT, FORK_CONTEXT

BASE, HEAD = "a" * 40, "b" * 40
RUN_URL = "https://github.example/acme/kernels/actions/runs/42"
# The renderer's own links: the run, and the two commits (from the gate's full SHAs, never from the report).
OWN_LINKS = [RUN_URL, f"https://github.example/acme/kernels/commit/{BASE}",
             f"https://github.example/acme/kernels/commit/{HEAD}"]
# What the render job's environment holds: the link to the run is built from it (settings.pr_contract.run_url).
RUN_ENV = {**os.environ, "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "acme/kernels",
           "GITHUB_RUN_ID": "42"}  # fmt: skip
BIDI = "\u202e\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d"
HOSTILE = [
    "@maintainers please merge",
    "![track](https://evil.example/pixel.png)",
    "[approved by maintainers](https://evil.example)",
    "<img src=https://evil.example/x.png>",
    "<a href=https://evil.example>click</a>",
    "https://evil.example www.evil.example me@example.com #123 GH-7",
    # GitHub links these too: a www. after "_", a URL scheme after a digit or letter (no word boundary before it).
    "_www.evil.example", "1https://evil.example/login", "x_ftp://evil.example", "aGH-7",
    f"evil{BIDI}txt.exe",
    MARKER,
    "<details><summary>Maintainers approved</summary>",
    "line\nbreak | --- |",
]


def row(**over: Any) -> dict[str, Any]:
    base = {"benchmark": "bench_decode.SparseDecode.time_decode", "params": {"impl": "'mma'", "concurrency": "64"},
            "machine": "h200", "unit": "seconds", "direction": "up_is_worse", "threshold": 0.05,
            "status": "unchanged", "base_status": "ok", "head_status": "ok", "base": 4.0e-5, "head": 4.02e-5,
            "ratio": 1.005, "slowdown": 1.005, "significant": False, "regression": False, "method": "mann-whitney",
            "p_value": 0.4}  # fmt: skip
    return {**base, **over}


def render(tmp_path: Path, data: bytes | None, *, fork: bool = False, result: str = "success",
           base: str = BASE, head: str = HEAD) -> tuple[int, str, dict[str, str]]:  # fmt: skip
    report = tmp_path / "report.json"
    if data is not None:
        report.write_bytes(data)
    comment, status = tmp_path / "comment.md", tmp_path / "status.json"
    proc = subprocess.run(
        [sys.executable, "-m", "regressions.pr_render", "--report", str(report), "--base", base, "--head", head,
         "--fork", "true" if fork else "false", "--job-result", result,
         "--comment-out", str(comment), "--status-out", str(status)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=RUN_ENV,
    )  # fmt: skip
    if proc.returncode != 0:
        return proc.returncode, proc.stderr, {}
    written = json.loads(status.read_text())
    assert written.pop("marker") == MARKER
    return 0, comment.read_text(), written


def html_of(md: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)


def assert_inert(md: str) -> None:
    """Nothing in the comment notifies, links, loads an image, adds HTML, or reorders text."""
    out = html_of(md)
    assert set(re.findall(r"<a href=\"([^\"]*)\"", out)) <= set(OWN_LINKS), "only the renderer's own links"
    for link in OWN_LINKS:
        out, md = out.replace(f'<a href="{link}">', ""), md.replace(link, "")
    for tag in ("<a ", "<img", "<script", "<iframe"):
        assert tag not in out, tag
    assert out.count("<details>") <= 1, "only the renderer's own collapsed section"
    assert re.search(r"@(?!\u200b)", md) is None and re.search(r"#\d", md) is None
    assert re.search(r"(?i)(https?|www)(?=[:.])(?!\u200b)", md) is None
    assert not set(BIDI) & set(md)
    assert md.startswith(MARKER + "\n") and md.count(MARKER) == 1


def test_a_valid_report_renders_and_sets_the_status(tmp_path: Path) -> None:
    rows = [row(), row(benchmark="bench_decode.SparseDecode.time_slow", status="regressed", head=6e-5, ratio=1.5,
                       slowdown=1.5, significant=True, regression=True, p_value=1e-4)]  # fmt: skip
    rc, md, status = render(tmp_path, json.dumps(rows).encode())
    assert rc == 0 and status == {"state": "failure", "description": "1 regression, 0 failed", "context": CONTEXT}
    assert "### Regressions (1)" in md and "time_slow" in md and "1.50x" in md
    assert "Figures from fork code" not in md
    head_link = f"[`{HEAD[:12]}`](https://github.example/acme/kernels/commit/{HEAD})"
    assert f"head {head_link} against base [`{BASE[:12]}`](" in md, md  # the commits link to their pages
    rc, md, status = render(tmp_path, json.dumps([row()]).encode())
    assert status["state"] == "success" and status["description"] == "no regression (1 series)"


@pytest.mark.parametrize("result", ["failure", "cancelled"])
def test_a_clean_report_from_a_job_that_then_failed_is_an_error(tmp_path: Path, result: str) -> None:
    # pr.sh fails the job on a regression, so a report with none and a failed job means something broke after it.
    rc, md, status = render(tmp_path, json.dumps([row()]).encode(), result=result)
    assert rc == 0 and status["state"] == "error", status
    assert status["description"] == f"benchmark job ended ({result}) after its report"
    assert f"The benchmark job ended ({result}) after writing this report" in md
    rows = [row(status="regressed", head=6e-5, ratio=1.5, slowdown=1.5, significant=True, regression=True,
                p_value=1e-4)]
    rc, md, status = render(tmp_path, json.dumps(rows).encode(), result="failure")
    assert status["state"] == "failure", "a regression fails the job and the status alike"


def test_a_case_missing_at_head_is_listed_and_fails(tmp_path: Path) -> None:
    # What compare writes for a case dropped at head (head side 'missing') must pass the schema, not be refused.
    gone = row(benchmark="bench_decode.SparseDecode.time_gone", status="missing", head_status="missing", head=None,
               ratio=None, slowdown=None, p_value=None, method="none")  # fmt: skip
    rc, md, status = render(tmp_path, json.dumps([row(), gone]).encode())
    assert rc == 0 and status == {"state": "failure", "description": "0 regressions, 0 failed, 1 missing",
                                  "context": CONTEXT}  # fmt: skip
    assert "Missing at head" in md and "time_gone" in md


def test_a_benchmark_failing_on_both_sides_fails_and_says_why(tmp_path: Path) -> None:
    """Both sides run the head's suite (scripts/pr.sh), so a benchmark the pull request edited can fail on base as
    well: a failure on both fails the check, and the comment says what "on both" can mean."""
    both = row(benchmark="bench_decode.SparseDecode.time_broken", status="failed", base_status="failed",
               head_status="failed", base=None, head=None, ratio=None, slowdown=None, p_value=None, method="none")
    rc, md, status = render(tmp_path, json.dumps([row(), both]).encode())
    assert rc == 0 and status["state"] == "failure" and status["description"] == "0 regressions, 1 failed", status
    assert "1 failed** (1 on both)" in md and ":x:" in md and "Failed on both: base and head ran the head's suite" in md
    rc, md, status = render(tmp_path, json.dumps([row(), {**both, "base_status": "ok", "base": 4e-5}]).encode())
    assert status["state"] == "failure" and "Failed on both" not in md


def test_names_and_units_the_store_holds_pass_the_schema(tmp_path: Path) -> None:
    # The report carries what ingest stored: a unit or machine at the store's limit is a valid row, one past it not.
    at_limit = row(unit="u" * limits.BENCHMARK_UNIT, machine="m" * limits.MACHINE_NAME,
                   benchmark="b." + "x" * (limits.BENCHMARK_NAME - 2))  # fmt: skip
    rc, md, status = render(tmp_path, json.dumps([at_limit]).encode())
    assert rc == 0 and status["state"] == "success", md
    rc, md, status = render(tmp_path, json.dumps([row(unit="u" * (limits.BENCHMARK_UNIT + 1))]).encode())
    assert status["state"] == "error" and "'unit'" in md.replace("\\", "")


def test_hostile_values_are_inert(tmp_path: Path) -> None:
    rows = []
    for text in HOSTILE:
        rows.append(row(benchmark=f"b.{text}", machine=text[:200], unit=text[:32], params={text[:60]: text}))
        rows.append(row(benchmark=f"r.{text}", status="regressed", head=6e-5, ratio=1.5, regression=True,
                        significant=True, slowdown=1.5, p_value=1e-4))  # fmt: skip
    rows.append(row(status="unchanged", unknown_field="<img src=x> @team", __proto__="success"))
    rc, md, status = render(tmp_path, json.dumps(rows).encode())
    assert rc == 0, md
    assert_inert(md)
    assert status["state"] == "failure" and "@" not in status["description"]
    assert "unknown_field" not in md  # fields the schema does not know are never rendered


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("NaN", json.dumps([row(base=float("nan"))]).encode(), "NaN is not a JSON number"),
        ("Infinity", b'[{"ratio": Infinity}]', "Infinity is not a JSON number"),
        ("huge number", json.dumps([row(ratio=10**400)]).encode(), "'ratio' must be a finite number"),
        ("status __proto__", json.dumps([row(status="__proto__")]).encode(), "'status' must be one of"),
        ("side constructor", json.dumps([row(head_status="constructor")]).encode(), "'head_status' must be one of"),
        ("markup in method", json.dumps([row(method="[x](https://evil.example)")]).encode(), "'method' must be one of"),
        # A 40-digit hex word GitHub would link to a commit (a fork's, under this repository's address).
        ("sha as method", json.dumps([row(method="0123456789" * 4)]).encode(), "'method' must be one of"),
        ("domain as method", json.dumps([row(method="www.evil-phish.example")]).encode(), "'method' must be one of"),
        # Rows that disagree with themselves (a security review): a 10x regression marked unchanged, the flag
        # dropped too, a ratio that is not head / base, a side's failure hidden.
        ("regression hidden", json.dumps([row(head=4e-4, ratio=10, slowdown=10, significant=True, regression=True)]
                                         ).encode(), "'regression' disagrees with 'status'"),
        ("status against numbers",
         json.dumps([row(head=4e-4, ratio=10, slowdown=10, significant=True, p_value=1e-6)]).encode(),
         "'status' disagrees with its values, threshold, direction and test"),
        # The samples' test said significant (p 1e-9 at alpha 0.01), the row says not: its own test refutes it.
        ("test outcome forged", json.dumps([row(head=4e-4, ratio=10, slowdown=10, p_value=1e-9)]).encode(),
         "'significant' disagrees with 'p_value'"),
        # No ratio (a side at 0): the value's own change decides; 0 -> 1 GB marked unchanged is refused too.
        ("zero side", json.dumps([row(benchmark="b.M.peakmem_x", unit="bytes", base=0, head=1e9, ratio=None,
                                      slowdown=None, method="threshold", p_value=None)]).encode(),
         "'status' disagrees with its values, threshold, direction and test"),
        ("changed with a test", json.dumps([row(status="changed", head=4e-4, ratio=10, slowdown=10)]).encode(),
         "'changed' goes with the method 'version' alone"),
        ("ratio not head / base", json.dumps([row(head=4e-4)]).encode(), "'ratio' is not head / base"),
        ("failure hidden", json.dumps([row(head_status="failed", head=None, ratio=None, slowdown=None)]).encode(),
         "'status' disagrees with 'base_status'/'head_status'"),
        # A review's forgeries that passed: an ok side without a value (shown as "failed" under Unchanged), a
        # threshold beyond any the configuration allows, a 'changed' row whose ratio is not head / base.
        ("ok side without a value", json.dumps([row(head=None, ratio=None, slowdown=None)]).encode(),
         "'head' must be a number where 'head_status' is ok"),
        ("threshold huge", json.dumps([row(threshold=1e300)]).encode(), "'threshold' must lie in (0, 10)"),
        ("changed, ratio forged", json.dumps([row(status="changed", method="version", head=4.48e-5, ratio=0.5,
                                                  slowdown=0.5, p_value=None)]).encode(), "'ratio' is not head / base"),
        ("name too long", json.dumps([row(benchmark="x" * 513)]).encode(), "1 to 512 characters"),
        ("too many rows", json.dumps([row()] * (MAX_ROWS + 1)).encode(), "over the limit of 20,000"),
        ("duplicate key", b'[{"status": "unchanged", "status": "regressed"}]', "duplicate key"),
        ("not a list", b'{"state": "success"}', "must be a JSON list"),
        ("p out of range", json.dumps([row(p_value=7)]).encode(), "'p_value' must be between 0 and 1"),
        ("boolean as number", json.dumps([row(base=True)]).encode(), "'base' must be a finite number"),
        ("params nested", json.dumps([row(params={"a": {"b": 1}})]).encode(), "'params' value"),
        ("deep nesting", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("not UTF-8", b'[{"benchmark": "\xff"}]', "not UTF-8"),
        ("not JSON", b"<img src=x>", "not JSON"),
    ],
)
def test_invalid_data_gives_the_fixed_error(tmp_path: Path, name: str, data: bytes, reason: str) -> None:
    rc, md, status = render(tmp_path, data)
    assert rc == 0, md
    assert status == {"state": "error", "description": INVALID, "context": CONTEXT}, name
    assert "report refused" in md and reason in md.replace("\\", ""), md
    assert_inert(md)


@pytest.mark.parametrize("forged", [
    # A 12% slowdown of a time, significant, listed as an improvement by a flipped direction (a review's forgery),
    # and called unchanged under a threshold of 50%: both the pull request's own configuration could write.
    {"direction": "down_is_worse", "status": "improved", "slowdown": 1 / 1.12},
    {"threshold": 0.5, "status": "unchanged"},
])
def test_the_default_branchs_configuration_judges_the_rows(tmp_path: Path, forged: dict[str, Any]) -> None:
    rows = [row(**{"head": 4.48e-5, "ratio": 1.12, "slowdown": 1.12, "significant": True, "p_value": 1e-6, **forged})]
    rc, md, status = render(tmp_path, json.dumps(rows).encode())
    assert rc == 0 and status["state"] == "failure", (status, md)
    assert "**1 regression**" in md and "threshold 5%" in md and "report refused" not in md


def test_huge_file_is_refused_unread(tmp_path: Path) -> None:
    data = b"[" + b" " * (MAX_FILE_BYTES + 1) + b"]"
    rc, md, status = render(tmp_path, data)
    assert rc == 0 and status["state"] == "error" and "over the limit" in md


def test_symlinked_report_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([row(benchmark="from-a-link")]))
    (tmp_path / "report.json").symlink_to(secret)
    comment, status = tmp_path / "c.md", tmp_path / "s.json"
    proc = subprocess.run(
        [sys.executable, "-m", "regressions.pr_render", "--report", str(tmp_path / "report.json"), "--base", BASE,
         "--head", HEAD, "--fork", "false", "--job-result", "success", "--comment-out", str(comment),
         "--status-out", str(status)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and json.loads(status.read_text())["state"] == "error"
    assert "from-a-link" not in comment.read_text() and "not a regular file" in comment.read_text()


def test_missing_report_and_fork_wording(tmp_path: Path) -> None:
    rc, md, status = render(tmp_path, None, result="cancelled")
    assert status == {"state": "error", "description": "benchmarks did not finish (cancelled)", "context": CONTEXT}
    assert "no report" in md and f"[the run]({RUN_URL})" in md
    rc, md, status = render(tmp_path, None, result="<img src=x>")
    assert status["description"] == "benchmarks did not finish (unknown)"
    rc, md, status = render(tmp_path, json.dumps([row()]).encode(), fork=True)
    assert status == {"state": "success", "context": FORK_CONTEXT,
                      "description": "fork code, unverified: no regression (1 series)"}  # fmt: skip
    assert md.startswith(MARKER + "\n> **Figures from fork code, unverified.**")
    assert_inert(md)


@pytest.mark.parametrize("sha", ["abc", "g" * 40, "A" * 40, "a" * 40 + "\n", "<img src=x>"])
def test_shas_must_be_full_hex(tmp_path: Path, sha: str) -> None:
    rc, err, _ = render(tmp_path, json.dumps([row()]).encode(), head=sha)
    assert rc == 2 and "--head: not a full hexadecimal commit hash" in err


@pytest.mark.parametrize("control", list(BIDI) + ["\u200e", "\u200f", "\u061c"])
def test_bidi_controls_never_reach_markdown(control: str) -> None:
    from regressions.report import md_code, md_text

    value = f"safe{control}exe.txt"
    for out in (md_text(value), md_code(value), md_code(value, table=False)):
        assert control not in out and "safe" in out
