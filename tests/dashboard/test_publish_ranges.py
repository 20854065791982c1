"""An alert group's commit range on the static site (and so on the dashboard: both read
``dashboard.triage.groups``) is the group's own, as `mlaperf detect --json` prints it, on third-party data: in
the vendored OpenBLAS history a gradual member joins a group at a later commit than the group's step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OPENBLAS, mlaperf_cli, site_data


@pytest.mark.skipif(not OPENBLAS.exists(), reason="vendored OpenBLAS results missing")
def test_site_group_range_is_the_detectors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    mlaperf_cli("ingest", str(OPENBLAS), "--db", url, "-q")
    mlaperf_cli("detect", "--db", url, "--full")
    listing = json.loads(mlaperf_cli("detect", "--db", url, "--json", "--all").stdout)
    mlaperf_cli("publish", "--db", url, "--out", str(tmp_path / "site"), "-q",
                "--repo-url", "https://github.com/OpenMathLib/OpenBLAS")
    member_commits = {g["id"]: {r["commit"] for r in listing["regressions"] if r["group"] == g["id"]}
                      for g in listing["groups"]}
    # The case the test is for: a group whose newest member is not at the group's commit.
    assert any(member_commits[g["id"]] - {g["range"]["commit"]} for g in listing["groups"])
    checked, pages = 0, 0
    for machine in {g["machine"] for g in listing["groups"]}:
        shown = {int(g["group"]): g for g in site_data(tmp_path / "site", f"{machine}/index")["groups"]}
        pages += len(shown)
        for g in (g for g in listing["groups"] if g["machine"] == machine and g["id"] in shown):
            page = shown[g["id"]]
            assert page["head"]["text"] == g["range"]["commit"][:8], (g["id"], page["head"], g["range"])
            assert page["head"]["href"].endswith(f"/commit/{g['range']['commit']}")
            if g["range"]["parent"]:
                assert page["parent"]["text"] == g["range"]["parent"][:8], (g["id"], page["parent"], g["range"])
            checked += 1
    assert checked == pages > 0  # every group page the site has is one the detector listed
