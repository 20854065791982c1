"""The Overview page's model: the alert groups that need a look, the latest commits and the machine's
description. Pure pandas (``dashboard/views/overview.py`` is the page); links come in as functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from dashboard import fmt, triage

ALERT_ROWS = 12
LATEST_COMMITS = 8
MACHINE_FIELDS = {"gpu_name": "GPU", "gpu_cc": "compute capability", "gpu_sm_count": "SMs",
                  "gpu_memory_gb": "GPU memory", "gpu_driver": "driver", "cuda": "CUDA", "torch": "torch",
                  "triton": "triton", "cpu": "CPU", "num_cpu": "CPU cores", "ram": "RAM", "os": "OS", "arch": "arch"}


def _message(m: object) -> str:
    return "" if fmt.is_missing(m) else str(m).strip()


def alert_rows(groups: pd.DataFrame, group_link: Callable[[object], str]) -> pd.DataFrame:
    """The newest groups not closed (at most ``ALERT_ROWS``) with their commit range, the whole culprit message
    (the grid shows its first line, all of it on hover) and a link to triage each (``group_link``)."""
    shown = groups[groups["category"] != "closed"].head(ALERT_ROWS)
    table = triage.group_table(shown)
    table.insert(2, "commits", [fmt.commit_range(p, s) for p, s in zip(shown["parent_sha"], shown["sha"],
                                                                       strict=True)])
    table.insert(3, "culprit", shown["message"].map(_message))
    table["triage"] = [group_link(g) for g in shown["group"]]
    return table


def latest_commits(commits: pd.DataFrame, commit_url: Callable[[str], str | None] | None) -> pd.DataFrame:
    """The newest ``LATEST_COMMITS`` commits, newest first, with a link to each where a repository is known."""
    latest = commits.iloc[::-1].head(LATEST_COMMITS)
    table = pd.DataFrame({
        "commit": latest["sha"].map(fmt.short_sha),
        "date": pd.to_datetime(latest["date"]).dt.strftime("%Y-%m-%d %H:%M"),
        "message": latest["message"].map(_message),
    })
    if commit_url is not None:
        table["link"] = [commit_url(s) for s in latest["sha"]]
    return table


def machine_rows(info: Mapping[str, Any]) -> pd.DataFrame:
    """The machine's known fields in units people read (GPU memory in GiB, as ``settings.gpu`` records it:
    ``total_memory / 2**30``, shown as "GB" beside RAM's GiB until a review; RAM in bytes' units), and the
    kernel arch profile its runner used."""
    shown = {label: info.get(k) for k, label in MACHINE_FIELDS.items() if info.get(k) not in (None, "", "none")}
    if "GPU memory" in shown:
        shown["GPU memory"] = f"{fmt.sig(float(shown['GPU memory']))} GiB"
    if "RAM" in shown:
        shown["RAM"] = fmt.fmt_ram(shown["RAM"])
    profile = info.get("arch_profile")
    if profile:
        shown["kernel arch profile"] = profile
    return pd.DataFrame({"value": [str(v) for v in shown.values()]}, index=list(shown))
