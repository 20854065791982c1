"""The dashboard on a PostgreSQL store (read-only transactions), through the same pages."""

from __future__ import annotations

import asv_synth
import pytest
from conftest import MLA_MACHINE, ROOT, SLOW_FROM, Seeded
from test_pages import app, goto, status_counts, table, vega

from db.provenance import is_provenance

pytestmark = pytest.mark.postgres


def test_pages_on_postgres(monkeypatch: pytest.MonkeyPatch, pg_seeded: Seeded) -> None:
    at = app(monkeypatch, pg_seeded.url)
    assert at.sidebar.selectbox(key="machine").value == MLA_MACHINE
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Commits"] == "12" and metrics["Fixed groups"] == "1"
    assert len(vega(goto(at, "throughput"))) == 1
    assert len(vega(goto(at, "history"))) == 1
    rows = table(goto(at, "regressions"), "before → after")
    assert set(rows["commits"]) == {f"{pg_seeded.shas[SLOW_FROM - 1][:8]}..{pg_seeded.shas[SLOW_FROM][:8]}"}
    assert len(vega(goto(at, "efficiency"))) == 3  # one chart per panel
    compare = goto(at, "compare")
    # every MLA series, one status; kernel-config records are provenance, not compared
    series = asv_synth.count_series([b for b in asv_synth.mla_benchmarks() if not is_provenance(b.name)])
    assert sum(status_counts(compare).values()) == series


def test_summary_triage_and_publish_on_postgres(monkeypatch: pytest.MonkeyPatch, pg_seeded: Seeded,
                                                tmp_path) -> None:  # noqa: ANN001
    import subprocess
    import sys

    at = goto(app(monkeypatch, pg_seeded.url, query={"sum_q": "time_decode mma"}), "summary")
    grid = at.dataframe[0].value
    assert len(grid) > 0 and grid["series"].str.contains("impl=mma").all()
    at = goto(app(monkeypatch, pg_seeded.url, writable=True), "regressions")
    at.text_input(key="reg_assign_to").input("ana").run()
    at.button(key="reg_save_triage").click().run()
    assert not at.exception
    assert set(table(goto(app(monkeypatch, pg_seeded.url, query={"reg_assignee": "ana"}), "regressions"),
                     "before → after")["assignee"]) == {"ana"}
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "publish", "--db", pg_seeded.url, "--out",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").exists()
