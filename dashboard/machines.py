"""Which machine a view opens on, and how an unknown machine name is reported: one rule for the dashboard
(``app.py``, ``mlaperf dashboard --machine``) and the static site (``mlaperf publish``). Pure pandas.

The machine measured last comes first (the newest run, ``last_run_at``; a tie by name, machines without a run
last): after a nightly or ``scripts/demo.sh`` that is the machine just measured, the one a person looks at.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def order(machines: pd.DataFrame) -> list[str]:
    """Machine names (``db.queries.machines``' frame), the one to open on first (see the module docstring)."""
    if machines.empty:
        return []
    last = pd.to_datetime(machines["last_run_at"], errors="coerce") if "last_run_at" in machines \
        else pd.Series(pd.NaT, index=machines.index)
    frame = pd.DataFrame({"name": machines["name"].astype(str), "last": last})
    # Newest first, name ascending within a tie: sort by name, then stably by date (NaT last).
    frame = frame.sort_values("name", kind="stable").sort_values("last", ascending=False, kind="stable",
                                                                  na_position="last")
    return list(frame["name"])


def unknown(name: str, known: Sequence[str]) -> str:
    """What to say of a machine name the store does not have (the CLI's ``--machine`` errors)."""
    return f"no machine named {name!r} (known: {', '.join(known) or 'none'})"
