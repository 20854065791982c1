"""asv benchmark suites of mlaperf (decode kernels, indexer path, decode step); see asv.conf.json.

The suites import ``settings`` (the environment names, GPU identity and ceilings shared with the runner)
from this checkout, the one asv loads the suites from: ``mlaperf run`` puts the commit under test first on
PYTHONPATH, whose ``settings`` may be older or missing. So the package is pinned here, before any suite
imports it. Standard library only, as everything asv imports at discovery.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _pin_settings() -> None:
    folder = Path(__file__).resolve().parents[1] / "settings"
    loaded = sys.modules.get("settings")
    if loaded is not None:
        if Path(str(loaded.__file__)).resolve().parent == folder:
            return  # already this checkout's (a test process, or asv's forkserver after discovery)
        for name in [n for n in sys.modules if n == "settings" or n.startswith("settings.")]:
            del sys.modules[name]
    spec = importlib.util.spec_from_file_location("settings", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])  # fmt: skip
    if spec is None or spec.loader is None or not folder.is_dir():
        raise ImportError(f"{folder} is missing: the benchmark suites read the environment contract from it")
    module = importlib.util.module_from_spec(spec)
    sys.modules["settings"] = module
    spec.loader.exec_module(module)


_pin_settings()
