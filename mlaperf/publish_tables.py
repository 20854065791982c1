"""The static site's tables: a DataFrame of display strings (a dashboard model's table) as JSON the page lays
out as it is: ``{"columns": [...], "rows": [[cell, ...]]}``, a cell a string or ``{"text", "href"}``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd


def table(frame: pd.DataFrame, links: Mapping[str, str] | None = None,
          shown_as: Mapping[str, Callable[[Any], str]] | None = None) -> dict[str, Any]:
    """``frame`` as a site table; ``links``: column -> the text its cells show, their values being URLs (an
    empty URL: an empty cell); a value that is a cell already (``{"text", "href"}``) stays one; ``shown_as``:
    numeric columns as their function of each value reads (the dashboard grid's, ``fmt.SHOWN_AS``)."""
    links, shown_as = links or {}, shown_as or {}
    cols = list(frame.columns)
    rows = []
    for values in frame.itertuples(index=False):
        rows.append([({"text": links[c], "href": str(v)} if v else "") if c in links
                     else shown_as[c](v) if c in shown_as
                     else v if isinstance(v, dict) else "" if v is None else str(v)
                     for c, v in zip(cols, values, strict=True)])
    return {"columns": [str(c) for c in cols], "rows": rows}
