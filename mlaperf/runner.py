"""``mlaperf run``: benchmark each commit of a git range with asv, in a throwaway git worktree.

For every commit (oldest first) the runner checks the commit out with ``git worktree add --detach``
into a temporary directory, puts that source first on ``PYTHONPATH`` (so the commit's
``mla_kernels`` is the one imported, ahead of the installed package) and runs, in the current
Python environment::

    asv run --python=same --set-commit-hash SHA --launch-method forkserver --record-samples --machine NAME

with the benchmark suites of the *current* checkout (asv always benchmarks old commits with the
current suites; suites skip what an old commit does not have). Commits that already have a result
file for the machine are skipped. The machine is registered in ``~/.asv-machine.json`` with asv's
own fields plus the GPU identity (``settings.gpu``), which asv copies into ``machine.json`` and
into every result file's ``params``. Without CUDA the CPU smoke tier runs (Triton interpreter) under
the machine name ``<name>-cpu``, so its series never mix with GPU series. Worktrees are removed
afterwards, also on errors and Ctrl-C.

"Already measured" comes from the store too (``--db``; commit x machine x benchmark version, see
``mlaperf.measured``), because a CI checkout deletes the ignored ``.asv/results``. asv runs in its own
process group: on Ctrl-C or SIGTERM the whole group (asv, its forkserver and benchmark processes) is
stopped (``mlaperf.procgroup``), then the worktree and the temporary directory are removed. RANGE is
resolved in ``mlaperf.run_commits``.

Exit status (the rule of every mlaperf command): 0 every commit measured (or skipped), 1 some benchmark
failed at a commit (for example the correctness gate) or a commit produced no result, 2 bad usage (bad
RANGE, machine, config), 3 internal error, 130/143 interrupted by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mlaperf.procgroup import UNIX_SOCKET_PATH_MAX, run_group
from mlaperf.run_commits import NEW_WINDOW, Commit, RunError, repo_root, resolve_specs, run_git
from settings import exits, gpu
from settings.args import DefaultsFormatter, add_asv_machine, add_bench, add_db, add_tier
from settings.disk import FULL_BELOW_BYTES, describe_bytes, free_bytes
from settings.env import (
    CONCURRENCY,
    DB,
    DEFAULT_STORE_URL,
    arch_profile,
    parse_concurrency,
    store_url,
    tier_environment,
)

CPU_SUFFIX = "-cpu"
DESCRIPTION = (
    "Benchmark each commit of RANGE with asv in a throwaway git worktree, using the current Python "
    "environment and the current checkout's benchmark suites (asv run --python=same --set-commit-hash "
    "SHA --launch-method forkserver --record-samples). Commits already measured for the machine (a result "
    "file, or a run in the store that covers the current benchmark versions) are skipped. The GPU identity "
    "is added to the asv machine entry. Without CUDA the CPU smoke tier (Triton interpreter) runs under the "
    "machine name <name>-cpu. Exit status: 0 ok, 1 some benchmark failed or a commit produced no result, "
    "2 bad usage, 3 internal error, 130/143 interrupted (SIGINT/SIGTERM: asv stopped, worktree removed)."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="benchmark each commit of a git range with asv (throwaway worktrees)",
        description=DESCRIPTION,
        formatter_class=DefaultsFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "range",
        nargs="*",
        default=["HEAD"],
        metavar="RANGE",
        help="commits to measure, in order: a commit (HEAD, a SHA, a tag), a git range A..B (first-parent "
        f"commits, oldest first), or NEW (the last {NEW_WINDOW} first-parent commits of HEAD; with --skip-existing "
        "only those not measured yet run); several may be given",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=None, help="asv results directory (default: asv.conf.json's)"
    )
    add_asv_machine(parser)
    add_bench(parser)
    add_tier(parser)
    parser.add_argument(
        "--skip-existing",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="skip commits already measured on this machine: a result file, or a run in the store (--db; "
        "'none' asks no store, nor does a default SQLite store not created yet) that covers the current "
        "benchmark versions",
    )
    add_db(parser)
    parser.add_argument(
        "--max-commits",
        type=int,
        default=None,
        metavar="N",
        help="measure at most N of the commits still to measure, the newest first (a nightly budget)",
    )
    parser.add_argument(
        "--concurrency",
        default=None,
        metavar="LIST",
        help="comma-separated subset of the concurrency grid, e.g. 1,16,64 (fewer points, same series)",
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="asv config file (default: asv.conf.json at the repo root)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commits and asv commands; run nothing"
    )


def load_config(path: Path, *, hint: str = "--config") -> dict[str, object]:
    """asv.conf.json at ``path``; ``hint`` says, where it is missing, what chose that path."""
    if not path.is_file():
        raise RunError(f"asv config {path} not found ({hint})")
    try:
        from asv.util import load_json

        return dict(load_json(str(path), js_comments=True))
    except Exception as exc:  # noqa: BLE001 - asv raises its own error types for bad JSON
        raise RunError(f"asv config {path} cannot be read: {exc}") from None


def machine_name(requested: str | None, tier: str) -> str:
    name = requested or platform.node() or "localhost"
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", name):
        raise RunError(f"--machine {name!r}: use letters, digits and . _ + - only (it becomes a folder name)")
    if tier == "cpu" and not name.endswith(CPU_SUFFIX):
        name += CPU_SUFFIX
    if tier == "gpu" and name.endswith(CPU_SUFFIX):
        raise RunError(f"--machine {name!r}: the suffix {CPU_SUFFIX!r} is reserved for the CPU smoke tier")
    return name


def resolve_tier(tier: str) -> str:
    if tier == "auto":
        return "gpu" if gpu.cuda_available() else "cpu"
    if tier == "gpu" and not gpu.cuda_available():
        raise RunError("--tier gpu, but torch sees no CUDA device")
    return tier


def register_machine(name: str, identity: dict[str, str]) -> dict[str, str]:
    """Write the asv machine entry (asv's default fields, any user-set values, the GPU identity).

    ``asv machine --yes --machine NAME`` would store the name alone, so the entry is built with
    asv's own ``Machine.get_defaults()`` and saved with asv's ``MachineCollection``.
    """
    from asv import util
    from asv.machine import Machine, MachineCollection

    entry: dict[str, str] = {k: str(v) for k, v in Machine.get_defaults().items()}
    try:
        entry.update(MachineCollection.load(name))
    except util.UserError:
        pass  # first run on this machine name
    entry.update(identity)
    entry["machine"] = name
    MachineCollection.save(name, entry)
    return entry


def existing_results(results_dir: Path, machine: str, sha: str) -> list[str]:
    return sorted(glob.glob(str(results_dir / glob.escape(machine) / f"{sha[:8]}-*.json")))


def asv_command(config: Path, sha: str, machine: str, bench: list[str] | None) -> list[str]:
    cmd = [
        sys.executable, "-m", "asv", "run", "--config", str(config),
        "--python=same", "--set-commit-hash", sha, "--launch-method", "forkserver",
        "--record-samples", "--show-stderr", "--machine", machine,
    ]  # fmt: skip
    for regex in bench or []:
        cmd += ["--bench", regex]
    return cmd


def benchmark_env(worktree: Path, tier: str, concurrency: str | None) -> dict[str, str]:
    """The environment of asv and its benchmark processes: ``worktree``'s code first, the tier and grid.
    Benchmark code (a commit under test, or a suite being listed) never sees the store's URL."""
    child = dict(os.environ)
    child.pop(DB.name, None)
    path = os.pathsep.join(p for p in (str(worktree), child.get("PYTHONPATH", "")) if p)
    child["PYTHONPATH"] = path
    child["ASV_PYTHONPATH"] = path  # asv-managed environments drop PYTHONPATH, keep this one
    child.update(tier_environment(tier))
    if concurrency:
        child[CONCURRENCY.name] = concurrency
    return child


def _check_concurrency(value: str | None) -> str | None:
    """``--concurrency`` as benchmark processes read it (``MLAPERF_CONCURRENCY``), None when not given."""
    if value is None:
        return None
    try:
        return ",".join(str(v) for v in parse_concurrency(value, "--concurrency"))
    except ValueError as exc:
        raise RunError(str(exc)) from None


def _fmt_elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def resolve_paths(conf: dict[str, object], root: Path, results_dir: Path | None = None) -> Path:
    """Make the config's paths absolute (asv runs from a temporary config); return the results dir."""

    def absolute(key: str, default: str) -> str:
        value = Path(str(conf.get(key) or default))
        return str(value if value.is_absolute() else (root / value).resolve())

    results = Path(results_dir).resolve() if results_dir else Path(absolute("results_dir", "results"))
    conf.update(
        repo=str(root),
        benchmark_dir=absolute("benchmark_dir", "benchmarks"),
        env_dir=absolute("env_dir", "env"),
        html_dir=absolute("html_dir", "html"),
        results_dir=str(results),
    )
    return results


def store_to_ask(requested: str | None) -> str | None:
    """The store asked what is measured (``settings.env.store_url``), or None: ``--db none``, or the default
    SQLite store not created yet (a first run needs no store)."""
    if requested is not None and requested.lower() == "none":
        return None
    url = store_url(requested)
    default_file = Path(DEFAULT_STORE_URL.removeprefix("sqlite:///"))
    return None if url == DEFAULT_STORE_URL and not default_file.is_file() else url


def measured_in_store(
    url: str, conf: dict[str, object], commits: list[Commit], machine: str, env: dict[str, str],
    bench: list[str] | None, cache: dict[str, Any] | None = None,
) -> dict[str, int]:  # fmt: skip
    """{sha: runs in the store that cover the current suite}; asks asv for the versions only when needed.

    ``cache``: a dict kept by the caller; the discovered versions are stored under "versions" and reused.
    """
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from db.engine import StoreError, check_revision, current_revision, make_engine, missing_sqlite_file
    from mlaperf import measured

    engine: Engine | None = None
    try:
        try:
            if missing_sqlite_file(url):
                return {}  # a store not created yet holds nothing
            engine = make_engine(url, readonly=True)
        except ValueError as exc:
            raise RunError(f"--db: {exc}") from None
        # A store mlaperf cannot use (corrupted, foreign, unreadable, another schema): said before measuring.
        current = current_revision(engine)
        if current is None:
            return {}  # an empty database holds nothing yet (ingest creates the schema)
        check_revision(engine.url, current)
        if not measured.machine_has_runs(engine, machine):
            return {}
        if cache is not None and "versions" in cache:
            versions = cache["versions"]
        else:
            try:
                versions = measured.discover_versions(conf, commits[-1].sha, machine, env, bench)
            except measured.DiscoveryError as exc:
                print(f"note: {exc}; a stored run of any version counts as measured", flush=True)
                versions = None
            if cache is not None:
                cache["versions"] = versions
        with Session(engine) as session:
            return measured.covering_runs(session, machine, [c.sha for c in commits], versions)
    except StoreError as exc:
        raise RunError(f"{exc} (nothing was measured)") from None
    finally:
        if engine is not None:
            engine.dispose()


def check_bench(conf: dict[str, object], sha: str, machine: str, env: dict[str, str], bench: list[str],
                cache: dict[str, Any] | None = None) -> None:
    """``--bench`` that selects no benchmark of the suite is bad input, said before anything is built or run
    (asv would set up every commit to measure nothing). Asks asv's discovery unless ``cache`` holds its
    answer (:func:`measured_in_store`'s); when discovery fails, says so and lets asv decide."""
    from mlaperf import measured

    if cache is not None and "versions" in cache:
        versions = cache["versions"]  # None: discovery failed already (measured_in_store said so)
    else:
        try:
            versions = measured.discover_versions(conf, sha, machine, env, bench)
        except measured.DiscoveryError as exc:
            print(f"note: --bench not checked: {exc}", flush=True)
            return
    if versions is None:
        print("note: --bench not checked: asv could not discover the benchmarks", flush=True)
        return
    if not versions:
        asked = " ".join(f"--bench {b!r}" for b in bench)
        raise RunError(f"{asked}: matches no benchmark of the suite in {conf.get('benchmark_dir', 'benchmarks')} "
                       "(asv matches 'module.Class.time_name' and 'name(params)'; nothing was measured)")


def _to_measure(args: argparse.Namespace, commits: list[Commit], conf: dict[str, object], root: Path,
                results_dir: Path, machine: str, tier: str, concurrency: str | None,
                cache: dict[str, Any] | None = None) -> list[Commit]:
    """The commits of RANGE to measure: not already measured (a result file, or a run in the store covering
    the current benchmark versions), at most the newest ``--max-commits``; says why each other is left.
    ``cache``: :func:`measured_in_store`'s, kept by the caller."""
    local = {c.sha: existing_results(results_dir, machine, c.sha) for c in commits} if args.skip_existing else {}
    ask = [c for c in commits if not local.get(c.sha)]  # a result file answers; the store (asv discovery) need not
    in_store: dict[str, int] = {}
    url = store_to_ask(args.db) if args.skip_existing else None
    if url and ask:
        in_store = measured_in_store(url, conf, ask, machine, benchmark_env(root, tier, concurrency), args.bench,
                                     cache)
    todo = []
    for c in commits:
        have = local.get(c.sha)
        if have:
            print(f"skip {c.sha[:8]} {c.subject!r}: already measured ({Path(have[0]).name})", flush=True)
        elif in_store.get(c.sha):
            print(f"skip {c.sha[:8]} {c.subject!r}: already measured (in the store)", flush=True)
        else:
            todo.append(c)
    if args.max_commits is not None and len(todo) > args.max_commits:
        kept = {c.sha for c in todo[::-1][: args.max_commits]}  # the newest ones, RANGE order kept
        for c in todo:
            if c.sha not in kept:
                print(f"later {c.sha[:8]} {c.subject!r}: over --max-commits {args.max_commits}", flush=True)
        todo = [c for c in todo if c.sha in kept]
    return todo


def _whole_json(path: str) -> bool:
    try:
        json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return False
    return True


def _check_room(results_dir: Path, sha: str | None = None, produced: list[str] | None = None) -> None:
    """RunError (exit 2) where the results folder's filesystem is full: asv cannot save results there, so measuring
    on would only turn every commit into a failure. ``sha``: the commit asv just ran, ``produced`` its results files;
    one that a full disk cut short (asv leaves it empty) is removed, or the next run would skip the commit as
    measured."""
    free = free_bytes(results_dir)
    if free is None or free >= FULL_BELOW_BYTES:
        return
    what = ""
    if sha:
        cut = [p for p in produced or [] if not _whole_json(p)]
        for path in cut:
            os.remove(path)
        removed = f" (removed the file it could not finish, {', '.join(Path(p).name for p in cut)})" if cut else ""
        what = f"asv could not save the results of {sha[:8]}{removed}: "
    raise RunError(f"{what}{describe_bytes(free)} free in the results folder {results_dir}; make room there and run "
                   "it again (the commits measured already are skipped)")


def _measure(todo: list[Commit], *, conf: dict[str, object], root: Path, results_dir: Path, machine: str, tier: str,
             concurrency: str | None, bench: list[str] | None, t0: float) -> int:
    """asv at each commit of ``todo`` in a throwaway worktree (removed also on errors and Ctrl-C); 1 when a
    commit produced no result or some benchmark failed, else 0."""
    status = exits.OK
    tmp = Path(tempfile.mkdtemp(prefix="mlrun-"))
    try:
        config = tmp / "asv.conf.json"
        config.write_text(json.dumps(conf, indent=2))
        asv_tmp: Path | None = tmp / "t"
        asv_tmp.mkdir()
        if len(str(asv_tmp)) + len("/asv-forkserver-xxxxxxxx/socket") >= UNIX_SOCKET_PATH_MAX:
            asv_tmp = None  # asv's forkserver socket would not fit; asv keeps the default TMPDIR
        for i, c in enumerate(todo, 1):
            _check_room(results_dir)
            elapsed = _fmt_elapsed(time.perf_counter() - t0)
            print(f"\n[{i}/{len(todo)}] {c.sha[:8]} {c.subject} (elapsed {elapsed})", flush=True)
            worktree = tmp / f"src-{c.sha[:12]}"
            run_git(root, "worktree", "add", "--detach", "--quiet", str(worktree), c.sha)
            try:
                t_commit = time.perf_counter()
                child = benchmark_env(worktree, tier, concurrency)
                if asv_tmp is not None:
                    child["TMPDIR"] = str(asv_tmp)  # asv's own temp files die with ours, even when asv is killed
                returncode = run_group(asv_command(config, c.sha, machine, bench), cwd=root, env=child)
            finally:
                _remove_worktree(root, worktree)
            produced = existing_results(results_dir, machine, c.sha)
            took = _fmt_elapsed(time.perf_counter() - t_commit)
            if returncode != 0 or not produced:
                _check_room(results_dir, c.sha, produced)  # a full disk is the machine's failure, not the commit's
            if not produced:
                print(f"[{i}/{len(todo)}] {c.sha[:8]}: no result, asv exit {returncode}", flush=True)
                status = exits.FOUND
            elif returncode != 0:
                print(f"[{i}/{len(todo)}] {c.sha[:8]}: done in {took}, some benchmarks failed", flush=True)
                status = exits.FOUND
            else:
                print(f"[{i}/{len(todo)}] {c.sha[:8]}: done in {took}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)
    return status


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    root = repo_root()
    config_path = (args.config or root / "asv.conf.json").resolve()
    conf = load_config(config_path)
    commits = resolve_specs(root, list(args.range))
    concurrency = _check_concurrency(args.concurrency)
    if args.max_commits is not None and args.max_commits < 0:
        raise RunError(f"--max-commits {args.max_commits}: expected 0 or more")
    tier = resolve_tier(args.tier)
    machine = machine_name(args.machine, tier)
    try:
        arch_profile()  # a profile the kernels would reject is bad input, found before anything runs
    except ValueError as exc:
        raise RunError(str(exc)) from None

    results_dir = resolve_paths(conf, root, args.results_dir)
    cache: dict[str, Any] = {}
    todo = _to_measure(args, commits, conf, root, results_dir, machine, tier, concurrency, cache)
    print(
        f"mlaperf run: commits to measure on machine {machine!r}: {len(todo)} of {len(commits)} "
        f"(tier {tier}), results in {results_dir}",
        flush=True,
    )
    if args.bench and todo:  # also in a dry run: what it prints would measure nothing
        check_bench(conf, todo[-1].sha, machine, benchmark_env(root, tier, concurrency), args.bench, cache)
    if args.dry_run:
        for i, c in enumerate(todo, 1):
            cmd = asv_command(config_path, c.sha, machine, args.bench)
            print(f"[{i}/{len(todo)}] {c.sha[:8]} {c.subject}\n    would run: {' '.join(cmd)}")
        return exits.OK
    if not todo:
        return exits.OK

    identity = gpu.identity(tier)
    register_machine(machine, identity)
    print("machine " + machine + ": " + ", ".join(f"{k}={v}" for k, v in identity.items()), flush=True)
    status = _measure(todo, conf=conf, root=root, results_dir=results_dir, machine=machine, tier=tier,
                      concurrency=concurrency, bench=args.bench, t0=t0)
    print(f"\nmlaperf run: finished in {_fmt_elapsed(time.perf_counter() - t0)}", flush=True)
    return status


def _remove_worktree(root: Path, worktree: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=root, capture_output=True)
    shutil.rmtree(worktree, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m mlaperf.runner [RANGE] ...``: the same as ``mlaperf run``."""
    parser = argparse.ArgumentParser(
        prog="mlaperf run", formatter_class=DefaultsFormatter, description=DESCRIPTION
    )
    add_arguments(parser)
    return exits.dispatch(run, parser.parse_args(argv), prog="mlaperf run")


if __name__ == "__main__":
    sys.exit(main())
