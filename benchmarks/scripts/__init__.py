"""Stand-alone measurement scripts, run as modules: ``python -m benchmarks.scripts.<name> --help``.

asv imports every module under ``benchmarks/`` while it discovers benchmarks, so each script here
must import nothing beyond the standard library at its top level (project and third-party imports
inside its functions, or under ``TYPE_CHECKING``), do nothing at import time,
and define no top-level ``time_*`` / ``track_*`` / ``mem_*`` / ``peakmem_*`` names (asv would run
them as benchmarks). ``tests/bench/test_scripts_package.py`` checks both.
"""
