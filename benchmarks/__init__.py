"""asv benchmark suites of mlaperf (decode kernels, indexer path, decode step); see asv.conf.json.

The suites import ``settings`` (the environment names, GPU identity and ceilings shared with the runner)
from this checkout, the one asv loads the suites from: ``mlaperf run`` puts the commit under test first on
PYTHONPATH, whose ``settings`` may be older or missing. So ``settings`` is pinned here to this checkout's
copy, the way asv pins ``benchmarks`` itself: a finder ahead of the others, which loads nothing until a
suite imports the package (importing a script stays standard library only).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType

_ROOT = str(Path(__file__).resolve().parents[1])


class _CheckoutSettings(importlib.abc.MetaPathFinder):
    """Finds the top-level package ``settings`` in this checkout only (its modules follow its path)."""

    def find_spec(self, name: str, path: object = None, target: ModuleType | None = None) -> object:
        if name != "settings":
            return None
        return importlib.machinery.PathFinder.find_spec(name, [_ROOT])


def _pin_settings() -> None:
    loaded = sys.modules.get("settings")
    if loaded is not None and Path(str(loaded.__file__)).resolve().parent != Path(_ROOT) / "settings":
        for name in [n for n in sys.modules if n == "settings" or n.startswith("settings.")]:
            del sys.modules[name]  # another checkout's copy, imported before the suites: use this one
    if not any(isinstance(f, _CheckoutSettings) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutSettings())


_pin_settings()
