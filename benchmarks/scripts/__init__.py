"""Stand-alone measurement scripts, run as modules: ``python -m benchmarks.scripts.<name> --help``.

asv imports every module under ``benchmarks/`` while it discovers benchmarks, so each script here
must import with the core dependencies only (no test or dev packages), do nothing at import time,
and define no top-level ``time_*`` / ``track_*`` / ``mem_*`` / ``peakmem_*`` names (asv would run
them as benchmarks). ``tests/bench/test_scripts_package.py`` checks both.
"""
