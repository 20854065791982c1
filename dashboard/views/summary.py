"""All benchmarks: every series of the machine with its newest value, a sparkline, its latest change and its
last flagged regression; a search box over names and parameters (kept in the URL). The grid is
``widgets.summary_grid`` over the model ``dashboard.summary``."""

from __future__ import annotations

import streamlit as st

from dashboard import widgets


def main() -> None:
    ctx = widgets.context()
    st.title("All benchmarks")
    widgets.summary_grid(ctx, key="sum_q")


if __name__ == "__main__":
    main()
