"""Finding asv output on disk: the results files under the paths given (an asv results directory, one
machine's directory, or a results file), and reading one safely (regular files only, non-blocking, at most
``limits.MAX_FILE_BYTES``)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from db import limits
from db.asvcheck import AsvFormatError, show_path
from settings.disk import describe_bytes

MACHINE_JSON = "machine.json"
BENCHMARKS_JSON = "benchmarks.json"


@dataclass(frozen=True)
class ResultFile:
    """A results file found on disk, with the asv results directory it belongs to (if recognisable)."""

    path: Path
    results_dir: Path | None

    @property
    def machine_json(self) -> Path:
        return self.path.parent / MACHINE_JSON

    @property
    def benchmarks_json(self) -> Path | None:
        return None if self.results_dir is None else self.results_dir / BENCHMARKS_JSON

    @property
    def source_path(self) -> str:
        """``machine/file.json``, the path asv itself uses for a results file."""
        return show_path(f"{self.path.parent.name}/{self.path.name}")


def _os_reason(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno == 40:  # ELOOP
        reason += " (a symlink loop)"
    return reason


def read_input(path: Path) -> bytes:
    """A file's bytes; raises :class:`AsvFormatError` for what cannot be a results file.

    Opened non-blocking (a FIFO named ``*.json`` must not hang the ingest), only regular files, at most
    ``limits.MAX_FILE_BYTES``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise AsvFormatError(f"cannot read: {_os_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else None
            raise AsvFormatError(f"not a regular file ({kind or 'a device or socket'})")
        if info.st_size > limits.MAX_FILE_BYTES:
            raise AsvFormatError(
                f"file is {describe_bytes(info.st_size)}, over the limit of "
                f"{describe_bytes(limits.MAX_FILE_BYTES)}"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limits.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise AsvFormatError(f"cannot read: {_os_reason(exc)}") from None
    finally:
        os.close(fd)
    if len(data) > limits.MAX_FILE_BYTES:  # grew while being read
        raise AsvFormatError(f"file is over the limit of {describe_bytes(limits.MAX_FILE_BYTES)}")
    return data


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _listdir(path: Path) -> list[str]:
    with os.scandir(path) as entries:
        return sorted(e.name for e in entries)


def _results_named(names: list[str]) -> bool:
    """Whether a directory listing holds an asv results file (a ``.json`` that is not metadata or a dotfile)."""
    return any(n.endswith(".json") and n not in (MACHINE_JSON, BENCHMARKS_JSON) and not n.startswith(".")
               for n in names)  # fmt: skip


def _holds_results(path: Path) -> bool:
    try:
        return _results_named(_listdir(path))
    except OSError:  # unreadable, and without machine.json: not known to be a machine's
        return False


def _machine_dirs(path: Path) -> tuple[list[Path], Path]:
    """The machine directories a directory argument names, and the results directory above them. A machine's
    directory is one with ``machine.json``, or, under a results directory (one with ``benchmarks.json``), one
    with results files: a copied or published results folder may lack a machine's ``machine.json`` (the files' own
    ``params`` name the machine). A directory of results files alone is one machine's."""
    if _is_file(path / MACHINE_JSON):
        return [path], path.parent
    names = _listdir(path)
    suite = BENCHMARKS_JSON in names and _is_file(path / BENCHMARKS_JSON)
    dirs = [path / n for n in names if not n.startswith(".") and os.path.isdir(path / n)]
    machines = [d for d in dirs if _is_file(d / MACHINE_JSON) or (suite and _holds_results(d))]
    if machines:
        return machines, path
    return ([path], path.parent) if _results_named(names) else ([], path)


def scan_inputs(paths: list[str | Path]) -> tuple[list[ResultFile], list[tuple[str, str]]]:
    """Results files under each path, and the paths that could not be used with their reason.

    A path is an asv results directory, one machine's directory, or a results file. ``machine.json``
    and ``benchmarks.json`` are metadata, never results. Nothing here raises for a bad path: a missing
    path, a symlink loop, an unreadable directory or a directory without asv results is reported.
    Dotfiles (editors' and partial copies) are ignored.
    """
    found: dict[str, ResultFile] = {}
    problems: list[tuple[str, str]] = []

    def add(file: Path, results_dir: Path | None) -> None:
        # One entry per real file (overlapping arguments, links to one file); a broken link is its own.
        key = os.path.realpath(file) if os.path.exists(file) else os.path.abspath(file)
        found.setdefault(key, ResultFile(file, results_dir))

    for raw in paths:
        path = Path(raw)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            reason = _os_reason(exc)
            if exc.errno == 2:
                reason = "dangling symlink" if os.path.lexists(path) else "no such file or directory"
            problems.append((str(raw), reason))
            continue
        if not stat.S_ISDIR(mode):
            if path.name not in (MACHINE_JSON, BENCHMARKS_JSON):
                root = path.parent.parent
                add(path, root if _is_file(root / BENCHMARKS_JSON) else None)
            continue
        try:
            machine_dirs, root = _machine_dirs(path)
            # Folders of results files beside the machines taken that are no machine's (no machine.json, and no
            # benchmarks.json above them): named, never passed over in silence.
            held = [n for n in _listdir(path) if not n.startswith(".") and os.path.isdir(path / n)
                    and path / n not in machine_dirs and _holds_results(path / n)] if root == path else []  # fmt: skip
            if not machine_dirs:
                problems.append((str(raw), "not an asv results directory: " + (
                    f"its subdirectories ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}) hold results "
                    "files but no machine.json, and it has no benchmarks.json (name each machine's folder, or add "
                    "the suite's benchmarks.json)" if held else
                    "no machine.json or results file in it or in its subdirectories")))
                continue
            problems.extend((str(path / n), "not read: it holds results files but no machine.json, and its results "
                             "directory has no benchmarks.json (name this folder itself, or add its machine.json)")
                            for n in held)  # fmt: skip
            results_dir = root if _is_file(root / BENCHMARKS_JSON) else None
            for machine_dir in machine_dirs:
                try:
                    names = _listdir(machine_dir)
                except OSError as exc:
                    problems.append((str(machine_dir), f"cannot list directory: {_os_reason(exc)}"))
                    continue
                for name in names:
                    if name.endswith(".json") and name != MACHINE_JSON and not name.startswith("."):
                        add(machine_dir / name, results_dir)
        except OSError as exc:
            problems.append((str(raw), f"cannot list directory: {_os_reason(exc)}"))
    return list(found.values()), problems


def find_result_files(paths: list[str | Path]) -> list[ResultFile]:
    """Results files under each path (see :func:`scan_inputs`); raises for the first unusable path.

    ``FileNotFoundError`` names a path that does not exist, ``ValueError`` any other unusable path.
    """
    files, problems = scan_inputs(paths)
    if problems:
        path, reason = problems[0]
        if reason == "no such file or directory":
            raise FileNotFoundError(f"no such file or directory: {path}")
        raise ValueError(f"{path} is {reason}" if reason.startswith("not an asv") else f"{path}: {reason}")
    return files
