"""Streamlit dashboard for mlaperf: reads the store through ``db.queries`` only.

Run it with ``mlaperf dashboard`` (see ``dashboard.serve``); the app entry point is ``dashboard/app.py``.
"""
