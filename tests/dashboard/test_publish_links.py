"""A link to the static site keeps its page: republished after one more night of results, every series'
address still opens that series, and a machine's folder is its name, not its place in a list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ROOT, mlaperf_cli, site_data

HISTORY = ROOT / "history" / "results"


def test_links_survive_a_republish_with_more_results(tmp_path: Path) -> None:
    runs = sorted((json.loads(p.read_text())["date"], p) for p in (HISTORY / "h200").glob("*-existing-*.json"))
    older = tmp_path / "older"
    shutil.copytree(HISTORY, older, ignore=shutil.ignore_patterns(runs[-1][1].name))  # one night fewer
    db = f"sqlite:///{tmp_path / 'store.sqlite'}"
    mlaperf_cli("ingest", str(older), "--db", db)
    mlaperf_cli("publish", "--db", db, "--out", str(tmp_path / "before"))
    mlaperf_cli("ingest", str(HISTORY), "--db", db)  # the newest run: new series, new benchmarks
    mlaperf_cli("publish", "--db", db, "--out", str(tmp_path / "after"))

    before, after = site_data(tmp_path / "before", "h200/index"), site_data(tmp_path / "after", "h200/index")
    assert [m["folder"] for m in site_data(tmp_path / "after", "site")["machines"]] == ["h200"]
    titles = {r["id"]: r["name"] for r in after["grid"]}
    assert len(titles) == len(after["grid"]) > len(before["grid"])  # ids unique; the newest run added series
    for row in before["grid"]:
        assert titles[row["id"]] == row["name"]  # the same address, the same series
        assert site_data(tmp_path / "after", f"h200/s{row['id']}")["title"] == \
            site_data(tmp_path / "before", f"h200/s{row['id']}")["title"]


def test_the_site_shows_who_has_an_alert_and_its_issue(tmp_path: Path) -> None:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from db.engine import make_engine
    from db.models import Regression
    from db.regression_queries import set_regression_triage

    db = f"sqlite:///{tmp_path / 'store.sqlite'}"
    mlaperf_cli("ingest", str(HISTORY), "--db", db)
    mlaperf_cli("detect", "--full", "--db", db)
    engine = make_engine(db)
    with Session(engine) as s:
        rid = s.execute(select(Regression.id).order_by(Regression.id).limit(1)).scalar_one()
        set_regression_triage(s, rid, assignee="ana", issue_url="https://github.com/acme/kernels/issues/7")
        s.commit()
    engine.dispose()
    mlaperf_cli("publish", "--db", db, "--out", str(tmp_path / "site"))
    text = json.dumps(site_data(tmp_path / "site", "h200/index"))
    assert '"assignee"' in text and '"ana"' in text and "https://github.com/acme/kernels/issues/7" in text
