"""Streamlit dashboard for mlaperf: reads the store through ``db.queries`` only.

Run it with ``mlaperf dashboard`` (see ``dashboard.cli``); the app entry point is ``dashboard/app.py``.
"""
