"""Detection settings: the slowdown threshold (default 5%, overridable per benchmark pattern) and declared
directions, read from ``[tool.mlaperf]`` in ``pyproject.toml`` or from ``mlaperf.toml``.

Example (``pyproject.toml``; in ``mlaperf.toml`` drop the ``tool.mlaperf.`` prefix)::

    [tool.mlaperf.thresholds]
    default = 0.05
    "bench_indexer.*" = 0.10          # fnmatch pattern on the benchmark name
    "*.track_roofline_fraction" = 0.08

    [tool.mlaperf.directions]
    "bench_step.*.track_occupancy" = "down_is_worse"

    [tool.mlaperf]
    removed = ["bench_decode.*.time_decode(impl=simt*"]   # cases a pull request removes on purpose

The most specific matching pattern (the longest one) wins. A ``removed`` pattern matches a benchmark name
or ``name(params)`` with the params as ``k=v, k=v`` in alphabetical order of their names, values as asv
writes them (``bench_decode.Decode.time_decode(concurrency=64, impl='simt')``).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_THRESHOLD = 0.05
KEYS = ("thresholds", "directions", "removed")  # what the table holds: any other key is refused
MAX_THRESHOLD = 10.0  # thresholds lie in (0, MAX_THRESHOLD): a flag or a configuration entry alike
DIRECTIONS = ("up_is_worse", "down_is_worse")


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and key."""


def case_text(benchmark: str, params: Mapping[str, Any]) -> str:
    """One case as a ``removed`` pattern names it: ``name(k=v, ...)``, the params in alphabetical order."""
    return f"{benchmark}({', '.join(f'{k}={params[k]}' for k in sorted(params))})"


@dataclass(frozen=True)
class Settings:
    """Thresholds and direction overrides; ``threshold_for``/``direction_override`` resolve one benchmark."""

    default_threshold: float = DEFAULT_THRESHOLD
    thresholds: dict[str, float] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    removed: tuple[str, ...] = ()  # fnmatch patterns of cases removed on purpose (`mlaperf compare`)

    def threshold_for(self, benchmark: str) -> float:
        pattern = _best_match(benchmark, self.thresholds)
        return self.thresholds[pattern] if pattern is not None else self.default_threshold

    def direction_override(self, benchmark: str) -> str | None:
        pattern = _best_match(benchmark, self.directions)
        return self.directions[pattern] if pattern is not None else None

    def is_removed(self, benchmark: str, params: dict[str, Any]) -> bool:
        """Whether the configuration declares this case (or its whole benchmark) removed."""
        case = case_text(benchmark, params)
        return any(fnmatch.fnmatchcase(benchmark, p) or fnmatch.fnmatchcase(case, p) for p in self.removed)

    def with_threshold(self, threshold: float | None) -> Settings:
        """A command-line ``--threshold`` applies to every series: it replaces the default and patterns."""
        if threshold is None:
            return self
        check_threshold(threshold, "--threshold")
        return Settings(threshold, {}, dict(self.directions), self.source, self.removed)


def _best_match(name: str, table: dict[str, Any]) -> str | None:
    matches = [p for p in table if fnmatch.fnmatchcase(name, p)]
    return max(matches, key=len) if matches else None


def threshold_in_range(value: float) -> bool:
    """The one bound on a threshold, wherever one comes from (a flag, the configuration, a report row)."""
    return 0.0 < value < MAX_THRESHOLD


def check_threshold(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not threshold_in_range(float(value)):
        raise ConfigError(f"{where}: threshold must be a number in (0, {MAX_THRESHOLD:g}), e.g. 0.05 for 5%; "
                          f"got {value!r}")
    return float(value)


def parse_settings(table: dict[str, Any], source: str) -> Settings:
    """Build Settings from the ``[tool.mlaperf]`` (or ``mlaperf.toml`` top-level) table. A key it does not know is
    refused, not skipped: a misspelt or misplaced table silently left every default in force (a review wrote
    ``[tool.mlaperf.directions]`` into mlaperf.toml and its false alerts stayed open)."""
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        hint = (" (in mlaperf.toml the tables have no tool.mlaperf. prefix: [directions], not "
                "[tool.mlaperf.directions])" if "tool" in unknown and not source.endswith("[tool.mlaperf]") else "")
        raise ConfigError(f"{source}: unknown key {', '.join(map(repr, unknown))}; it holds "
                          f"{', '.join(KEYS)}{hint}")
    thresholds_raw = table.get("thresholds", {})
    directions_raw = table.get("directions", {})
    if not isinstance(thresholds_raw, dict):
        raise ConfigError(f"{source}: [thresholds] must be a table")
    if not isinstance(directions_raw, dict):
        raise ConfigError(f"{source}: [directions] must be a table")
    default = DEFAULT_THRESHOLD
    thresholds: dict[str, float] = {}
    for key, value in thresholds_raw.items():
        checked = check_threshold(value, f"{source}: thresholds.{key!r}")
        if key == "default":
            default = checked
        else:
            thresholds[key] = checked
    directions: dict[str, str] = {}
    for key, value in directions_raw.items():
        if value not in DIRECTIONS:
            raise ConfigError(f"{source}: directions.{key!r} must be one of {DIRECTIONS}; got {value!r}")
        directions[key] = value
    removed = table.get("removed", [])
    if not isinstance(removed, list) or not all(isinstance(p, str) for p in removed):
        raise ConfigError(f"{source}: removed must be a list of benchmark name patterns")
    return Settings(default, thresholds, directions, source, tuple(removed))


def load_settings(path: str | Path | None = None, *, search_dir: str | Path = ".") -> Settings:
    """Settings from ``path`` (``mlaperf.toml`` or ``pyproject.toml``), else from ``mlaperf.toml`` or
    ``pyproject.toml`` in ``search_dir``; built-in defaults when neither has a table."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"--config: file not found: {p}")
        return _load_file(p, named=True)
    for name in ("mlaperf.toml", "pyproject.toml"):
        p = Path(search_dir) / name
        if p.is_file():
            settings = _load_file(p)
            if settings.source is not None:
                return settings
    return Settings()


def _load_file(p: Path, named: bool = False) -> Settings:
    """Settings of one file; ``named``: given as ``--config``, where a pyproject.toml without ``[tool.mlaperf]``
    is an error, not the defaults."""
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc
    if p.name == "pyproject.toml":
        tools = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
        table = tools.get("mlaperf")
        # A table that reads like ours and is not ([tool.mlaperf-directions], [tool.MLAPERF]) would leave every
        # default in force without a word.
        near = sorted(k for k in tools if k != "mlaperf" and k.lower().replace("_", "-").startswith("mlaperf"))
        if near:
            raise ConfigError(f"{p}: [tool.{near[0]}] is no mlaperf table; the tables are [tool.mlaperf.thresholds], "
                              "[tool.mlaperf.directions] and [tool.mlaperf] removed")
        if table is None and named:
            raise ConfigError(f"--config {p}: no [tool.mlaperf] table in it")
        if table is None:
            return Settings()
        return parse_settings(table, f"{p} [tool.mlaperf]")
    return parse_settings(data, str(p))
