"""Alert groups and triage categories from the regression listing (pure pandas: no Streamlit, no database).

The detector stores each flagged step as a regression; regressions found together on one machine at one
commit form one alert group (the ``group`` id the detector records, or, for regressions stored before it
recorded one, the same rule applied here: machine + commit). A group's status is its most pressing
member's (``db.models.AlertGroup.status_of``); its category, for the Overview and the Regressions page:

- ``open``: new or acknowledged (confirmed, not fixed),
- ``suspect``: seen only in the newest run, waiting for the next run to confirm or refute it,
- ``fixed``: came back at a later commit,
- ``closed``: ignored, transient (refuted) or retired (the series stopped running).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

from dashboard import fmt, notes
from db import queries
from regressions.direction import slowdown
from regressions.policy import kind_suffix

CATEGORIES = ("open", "suspect", "fixed", "closed")
# Statuses a person may set from the dashboard (with a note); the others belong to the detector.
TRIAGE_ACTIONS = {"Acknowledge": "acknowledged", "Ignore": "ignored", "Reopen": "new"}
# The category of each stored status (``db.models.REGRESSION_STATUSES``, every one: tested).
CATEGORY_OF = {"new": "open", "acknowledged": "open", "suspect": "suspect", "fixed": "fixed",
               "transient": "closed", "retired": "closed", "ignored": "closed"}


def group_status(statuses: pd.Series) -> str:
    """A group's status: its most pressing member's (``db.models.AlertGroup.status_of``, the one rule)."""
    from db.models import AlertGroup

    return AlertGroup.status_of(statuses)


def enrich(regs: pd.DataFrame, messages: dict[str, Any], notes: dict[int, list[dict[str, Any]]]) -> pd.DataFrame:
    """The listing plus: group, machine_wide, labels, parent_message, fixed_message, note (newest triage
    note), notes (all), category (of the row's group)."""
    out = regs.copy()
    for col, default in (("machine_wide", False), ("group_kind", None), ("labels", None), ("fixed_sha", None),
                         ("parent_sha", None), ("group_commit", None), ("group_parent", None)):
        if col not in out.columns:
            out[col] = default
    if out.empty:
        for col in ("group", "parent_message", "fixed_message", "note", "notes", "category"):
            out[col] = pd.Series(dtype=object)
        return out
    if "group" not in out.columns:
        out["group"] = None
    missing = out["group"].isna()
    if missing.any():
        # Stored before the detector recorded groups: the same rule (one machine, one commit), numbered
        # after the recorded ones, by first id.
        top = int(pd.to_numeric(out["group"], errors="coerce").max()) if not missing.all() else 0
        first = out[missing].groupby(["machine", "sha"])["id"].transform("min")
        out.loc[missing, "group"] = top + first.rank(method="dense").astype(int)
    out["group"] = out["group"].astype(int)
    out["machine_wide"] = out["machine_wide"].fillna(False).astype(bool)
    out["parent_message"] = out["parent_sha"].map(lambda s: messages.get(s) if isinstance(s, str) else None)
    out["fixed_message"] = out["fixed_sha"].map(lambda s: messages.get(s) if isinstance(s, str) else None)
    out["group_message"] = out["group_commit"].map(lambda s: messages.get(s) if isinstance(s, str) else None)
    out["group_parent_message"] = out["group_parent"].map(lambda s: messages.get(s) if isinstance(s, str) else None)
    out["notes"] = out["id"].map(lambda i: notes.get(int(i), []))
    out["note"] = out["notes"].map(lambda n: note_text(n[-1]) if n else "")
    # Every group's status from its listed members by the one rule (AlertGroup.status_of): for a group the
    # detector recorded this equals its group_status (the listing holds every member), and groups derived
    # here get the same.
    out["group_status"] = out.groupby("group")["status"].transform(group_status)
    out["category"] = out["group_status"].map(CATEGORY_OF).fillna("closed")
    return out


def note_text(entry: dict[str, Any]) -> str:
    """A triage note as shown: ``expected: BLOCK_H=16 was deliberate (ana@example.com)``."""
    by = entry.get("by")
    return f"{entry.get('note', '')} ({by})" if by else str(entry.get("note", ""))


def _fixed_at(fixed_sha: pd.Series) -> str:
    """The fixing commit's short sha, "3 commits" when the members came back at different ones, "" when none did;
    "2 of 31: 1c6b3169" when only some did (a group still new read "fixed at 1c6b3169" beside it: a review)."""
    fixed = fixed_sha.dropna().unique()
    if not len(fixed):
        return ""
    text = fmt.short_sha(fixed[0]) if len(fixed) == 1 else f"{len(fixed)} commits"
    done = int(fixed_sha.notna().sum())
    return text if done == len(fixed_sha) else f"{done} of {len(fixed_sha)}: {text}"


def groups(regs: pd.DataFrame) -> pd.DataFrame:
    """One row per alert group, newest commit first: group, machine, sha, message, parent_sha,
    parent_message, series (count), worst (largest slowdown factor, direction-aware), statuses
    ("4 fixed"), group_status, category, machine_wide, kind (``policy.group_kind``), fixed_at (:func:`_fixed_at`),
    benchmarks (distinct names)."""
    cols = ["group", "machine", "sha", "date", "message", "parent_sha", "parent_message", "series", "worst",
            "statuses", "group_status", "category", "machine_wide", "kind", "fixed_at", "benchmarks"]
    if regs.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    # How much worse each series got: the nightly's issue titles the group with the same number.
    ratios = pd.to_numeric(regs["ratio"], errors="coerce")
    worse = [slowdown(float(r), str(d)) for r, d in zip(ratios, regs["direction"], strict=True)]
    df = regs.assign(_worse=worse, _order=np.arange(len(regs)))
    rows = []
    for gid, g in df.groupby("group", sort=False):
        counts = g["status"].value_counts()
        rows.append({
            "group": gid,
            "machine": g["machine"].iloc[0],
            **_group_range(g),
            "series": len(g),
            "worst": float(g["_worse"].max()),
            "statuses": ", ".join(f"{n} {s}" for s, n in counts.items()),
            "group_status": g["group_status"].iloc[0],
            "category": g["category"].iloc[0],
            "machine_wide": bool(g["machine_wide"].any()),
            "kind": _kind(g),
            "fixed_at": _fixed_at(g["fixed_sha"]),
            "benchmarks": sorted(set(g["benchmark"])),
            "_order": int(g["_order"].min()),
        })
    return pd.DataFrame(rows).sort_values("_order").drop(columns="_order").reset_index(drop=True)[cols]


def _kind(g: pd.DataFrame) -> str | None:
    """A group's kind as the detector recorded it; machine-wide for one stored before kinds were (else None)."""
    kind = g["group_kind"].iloc[0] if "group_kind" in g else None
    return kind if isinstance(kind, str) else "machine-wide" if g["machine_wide"].any() else None


def _group_range(g: pd.DataFrame) -> dict[str, Any]:
    """A group's commit range as the detector stored it (``mlaperf detect`` and the nightly's issue print the
    same), not its newest member's: a gradual member found later sits at a later commit. A group the detector
    did not record (stored before groups) has its members' one commit."""
    def first(col: str) -> Any:
        return g[col].dropna().iloc[0] if col in g and g[col].notna().any() else None

    head = first("group_commit")
    if head is None:
        return {"sha": g["sha"].iloc[0], "date": first("date"), "message": first("message"),
                "parent_sha": first("parent_sha"), "parent_message": first("parent_message")}
    at = g.loc[g["sha"] == head, "date"] if "date" in g else pd.Series(dtype=object)
    return {"sha": head, "date": at.iloc[0] if len(at) else None, "message": first("group_message"),
            "parent_sha": first("group_parent"), "parent_message": first("group_parent_message")}


def group_table(group_frame: pd.DataFrame, *, statuses: bool = False) -> pd.DataFrame:
    """The columns every alert-group table shows: group, state (the group's status, machine-wide, and with
    ``statuses`` its members' statuses where they differ), series, worst, fixed at; pages insert their own."""
    state = group_frame["group_status"] + group_frame["kind"].map(kind_suffix)  # as `mlaperf detect` lists it
    if statuses:
        state += group_frame["statuses"].map(lambda s: f" ({s})" if "," in s else "")
    return pd.DataFrame({
        "group": group_frame["group"].astype(str),
        "state": state,
        "series": group_frame["series"],
        "worst": group_frame["worst"].map(fmt.fmt_ratio),
        "fixed at": group_frame["fixed_at"],
    })


def counts(group_frame: pd.DataFrame) -> dict[str, int]:
    """Groups per category, plus ``machine_wide`` (groups spanning most of a machine's series)."""
    out = {c: 0 for c in CATEGORIES}
    if not group_frame.empty:
        for c, n in group_frame["category"].value_counts().items():
            out[str(c)] = int(n)
    out["machine_wide"] = int(group_frame["machine_wide"].sum()) if not group_frame.empty else 0
    return out


def regression_listing(s: Session, machine: str | None = None) -> pd.DataFrame:
    """The regression listing of `mlaperf detect --json` (``regressions.store.regressions_frame``: alert group,
    machine-wide flag, parent commit, labels where the detector records them) with what triage needs:
    params_key, commit messages, triage notes and fields, the group's category (:func:`enrich`). The
    dashboard's cached loader and the static site both read it."""
    from regressions.store import regressions_frame

    regs = regressions_frame(s, machine=machine).rename(columns={"parent": "parent_sha"})
    messages = queries.commit_messages(s, [*regs["parent_sha"].dropna(), *regs["fixed_sha"].dropna(),
                                           *regs["group_commit"].dropna(), *regs["group_parent"].dropna()])
    # Assignee and issue link come with the listing (the CLI's too); who last changed the status from here.
    fields = queries.triage_fields(s, regs["id"])[["id", "status_by"]] if not regs.empty else None
    if fields is not None:
        regs = regs.merge(fields, on="id", how="left")
    else:
        regs = regs.assign(status_by=pd.Series(dtype=object))
    return enrich(regs, messages, notes.triage_notes(s))
