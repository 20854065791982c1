"""The nightly's GitHub Pages deployment, read from the YAML: a job of its own that exists only where an admin
turned it on (repository variable MLAPERF_PAGES), on a GitHub-hosted runner, with nothing but the Pages
permissions, running no code (no checkout, no run step): it moves the site the record2 job published (the
night's artifact) to Pages with the pinned upload-pages-artifact and deploy-pages actions."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from scratch import ROOT

NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
PINNED = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")


def _jobs() -> dict[str, Any]:
    return yaml.safe_load(NIGHTLY.read_text())["jobs"]


def test_pages_job_is_gated_and_least_privileged() -> None:
    jobs = _jobs()
    pages = jobs["pages"]
    assert pages["if"] == "vars.MLAPERF_PAGES == 'true'"
    assert pages["needs"] == "record2" and pages["runs-on"] == "ubuntu-latest"
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["environment"]["name"] == "github-pages"
    assert "secrets." not in json.dumps(pages)
    # No other job may deploy or hold the Pages permissions.
    for name, job in jobs.items():
        if name != "pages":
            assert not {"pages", "id-token"} & set(job.get("permissions") or {}), name
            assert not any("-pages@" in s.get("uses", "") for s in job["steps"]), name


def test_pages_job_runs_no_code_and_deploys_the_nights_site() -> None:
    jobs = _jobs()
    steps = jobs["pages"]["steps"]
    # One run step: the check of the artifact against record2's digest (one shell line of this file, the same as
    # every consumer's, test_workflow_trust); nothing of the repository or the artifact is executed.
    runs = [s for s in steps if "run" in s]
    check = next(s for s in jobs["alert"]["steps"] if s.get("env", {}).get("WANT"))
    assert [s["run"] for s in runs] == [check["run"]] and steps.index(runs[0]) == 1, runs
    assert "python" not in runs[0]["run"] and "bash " not in runs[0]["run"] and "./" not in runs[0]["run"]
    steps = [s for s in steps if "run" not in s]
    uses = [s["uses"] for s in steps]
    assert [u.split("@")[0] for u in uses] == ["actions/download-artifact", "actions/upload-pages-artifact",
                                               "actions/deploy-pages"]
    assert all(PINNED.fullmatch(u) for u in uses), uses
    text = NIGHTLY.read_text()
    for u in uses:
        assert re.search(rf"{re.escape(u)} # v\d", text), f"{u}: name the tag in a comment"
    download, package, _ = steps
    upload = next(s for s in jobs["record2"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    # The record job's nonce: no earlier job (the measuring ones included) can have uploaded under that name.
    assert upload["with"]["name"] == "nightly-benchmarks-${{ steps.nonce.outputs.nonce }}"
    assert download["with"]["name"] == "nightly-benchmarks-${{ needs.record2.outputs.nonce }}"
    publish = next(s for s in jobs["record2"]["steps"] if "mlaperf.cli publish" in s.get("run", ""))
    out = publish["run"].split("--out ")[1].split()[0]
    assert out == package["with"]["path"] == f"{download['with']['path']}/site"
    assert steps[-1]["id"] == "deployment"
    assert jobs["pages"]["environment"]["url"] == "${{ steps.deployment.outputs.page_url }}"
