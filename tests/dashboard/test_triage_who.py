"""Who triaged what (issue 26 item 6) and assignment (issue 28 item 2) in a ``--writable`` dashboard: without
sign-in configured the page says it is unauthenticated and records the local user on the status and the note;
with sign-in configured but unusable, nothing can be changed; an assignee and an issue link are stored (migration
0008), shown and filtered through the URL."""

from __future__ import annotations

import pytest
from conftest import APP, Seeded
from sqlalchemy import select
from sqlalchemy.orm import Session
from test_pages import app, goto, table, texts

from dashboard import auth


def _stored(url: str) -> tuple[list[tuple[str, str | None, str | None, str | None]], dict[int, list[dict]]]:
    from dashboard import notes
    from db.engine import make_engine
    from db.models import Regression

    engine = make_engine(url, readonly=True)
    with Session(engine) as s:
        rows = [tuple(r) for r in s.execute(select(Regression.status, Regression.status_by, Regression.assignee,
                                                   Regression.issue_url)).all()]
        log = notes.triage_notes(s)
    engine.dispose()
    return rows, log


def test_unauthenticated_records_the_local_user(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded) -> None:
    at = goto(app(monkeypatch, writable_copy.url, writable=True), "regressions")
    me = auth.local_user()
    assert any("Unauthenticated" in c.value and me in c.value for c in at.sidebar.caption)
    at.text_input(key="reg_note").input("known: new driver").run()
    at.button(key="reg_acknowledged").click().run()
    assert not at.exception
    rows, log = _stored(writable_copy.url)
    changed = [(status, by) for status, by, _, _ in rows if by is not None]
    assert changed and set(changed) == {("acknowledged", me)} and len(changed) == len(log)
    assert all(n[-1]["by"] == me for n in log.values())

    # Assign the group and link its issue: stored, shown, and a URL filter.
    at.text_input(key="reg_assign_to").input("ana").run()
    at.text_input(key="reg_issue").input("https://github.com/example/mlaperf/issues/7").run()
    at.button(key="reg_save_triage").click().run()
    assert not at.exception
    rows, _ = _stored(writable_copy.url)
    assigned = [r for r in rows if r[2] == "ana"]
    assert assigned and all(r[3] == "https://github.com/example/mlaperf/issues/7" for r in assigned)
    at = goto(app(monkeypatch, writable_copy.url, writable=True, query={"reg_assignee": "ana"}), "regressions")
    shown = table(at, "before → after")
    assert set(shown["assignee"]) == {"ana"} and shown["issue"].str.endswith("/issues/7").all()
    at = goto(app(monkeypatch, writable_copy.url, writable=True, query={"reg_assignee": "bob"}), "regressions")
    assert "No group matches the filters" in texts(at)


def test_a_bad_issue_link_is_refused(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded) -> None:
    at = goto(app(monkeypatch, writable_copy.url, writable=True), "regressions")
    at.text_input(key="reg_issue").input("javascript:alert(1)").run()
    at.button(key="reg_save_triage").click().run()
    assert "must start with https://" in texts(at)
    rows, _ = _stored(writable_copy.url)
    assert all(r[3] is None for r in rows)


def test_configured_sign_in_without_authlib_changes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                           writable_copy: Seeded) -> None:
    import importlib.util

    if importlib.util.find_spec("authlib") is not None:
        pytest.skip("Authlib is installed: sign-in would be offered instead")
    monkeypatch.setenv("MLAPERF_DB", writable_copy.url)
    monkeypatch.setenv("MLAPERF_DASHBOARD_WRITABLE", "1")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=90)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x",
                          "client_id": "id", "client_secret": "s",
                          "server_metadata_url": "https://id.example.com/.well-known/openid-configuration"}
    at.run()
    at.switch_page("views/regressions.py").run()
    assert not at.exception
    assert "Authlib is not installed" in texts(at)
    assert not [b for b in at.button if b.key in ("reg_acknowledged", "reg_ignored", "reg_new")]


def test_set_regression_triage_checks_the_link(writable_copy: Seeded) -> None:
    from db import queries
    from db.engine import make_engine
    from db.models import Regression

    engine = make_engine(writable_copy.url)
    with Session(engine) as s, s.begin():
        rid = s.scalars(select(Regression.id)).first()
        with pytest.raises(ValueError, match="http"):
            queries.set_regression_triage(s, rid, assignee="ana", issue_url="ftp://x/1")
        with pytest.raises(queries.NotFound):
            queries.set_regression_triage(s, 10**6, assignee="ana", issue_url="")
        status = queries.set_regression_triage(s, rid, assignee="  ana ", issue_url="https://x/issues/1")
        assert status == s.get(Regression, rid).status
        assert queries.triage_fields(s, [rid]).iloc[0].to_dict() == {
            "id": rid, "assignee": "ana", "issue_url": "https://x/issues/1", "status_by": None}
        queries.set_regression_triage(s, rid, assignee="", issue_url=None)  # clears both
        assert s.get(Regression, rid).assignee is None and s.get(Regression, rid).issue_url is None
    engine.dispose()
