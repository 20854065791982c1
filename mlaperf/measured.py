"""What the store already holds: "already measured" is commit x machine x benchmark version.

A CI checkout deletes ``.asv/results`` (``git clean -ffdx``), so result files cannot say what was measured;
the store can. A run of commit C on machine M *covers* the current suite when it has a result (any
status: ok, failed or skipped) for every benchmark of the suite at the suite's asv ``version``; a commit
is measured when some run covers it. A benchmark whose code changed gets a new version, so commits
measured with the old one count as unmeasured again and are filled in within later nights' budgets.
The current versions come from asv's own discovery (``asv run --bench just-discover``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Machine, Result, Run


class DiscoveryError(RuntimeError):
    """asv could not discover the benchmark suite (e.g. a benchmark module does not import)."""


def discover_versions(
    conf: Mapping[str, Any], sha: str, machine: str, env: Mapping[str, str], bench: Sequence[str] | None = None
) -> dict[str, str]:
    """{benchmark name: asv version} of the suite ``conf`` points at, restricted like ``asv run --bench``.

    Runs asv's discovery (it imports the benchmark modules, as every ``asv run`` does) with the results
    going to a temporary folder, so nothing of the real results directory changes.
    """
    from asv import util
    from asv.benchmarks import Benchmarks

    with tempfile.TemporaryDirectory(prefix="mlaperf-discover-") as tmp:
        config = Path(tmp) / "asv.conf.json"
        config.write_text(json.dumps({**conf, "results_dir": str(Path(tmp) / "results")}))
        # asv wants the machine registered; a HOME of its own with a bare entry, so a machine not registered
        # yet (a dry run, a first run) is discovered too and the user's ~/.asv-machine.json is never written.
        home = Path(tmp) / "home"
        home.mkdir()
        bare = {key: "" for key in ("os", "arch", "cpu", "num_cpu", "ram")}
        (home / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: {"machine": machine, **bare}}))
        cmd = [
            sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same",
            "--set-commit-hash", sha, "--machine", machine, "--bench", "just-discover",
        ]  # fmt: skip
        # git (asv asks it for the commit) keeps the user's own config: safe.directory, includes.
        real = Path.home()
        child = {"GIT_CONFIG_GLOBAL": str(real / ".gitconfig"), "XDG_CONFIG_HOME": str(real / ".config"),
                 **env, "HOME": str(home)}  # fmt: skip
        proc = subprocess.run(cmd, cwd=str(conf["repo"]), env=child, capture_output=True, text=True)
        path = Path(tmp) / "results" / "benchmarks.json"
        if proc.returncode != 0 or not path.is_file():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise DiscoveryError("asv could not discover the benchmarks: " + " | ".join(tail))
        entries = util.load_json(str(path), api_version=Benchmarks.api_version)
    selected = Benchmarks(
        SimpleNamespace(benchmark_dir=conf["benchmark_dir"]), entries.values(), regex=list(bench or [])
    )
    return {name: str(entries[name]["version"]) for name in selected}


def covering_runs(
    session: Session, machine: str, shas: Iterable[str], versions: Mapping[str, str] | None
) -> dict[str, int]:
    """{sha: number of runs of that commit on ``machine`` that cover ``versions``} (absent: none).

    ``versions`` None counts every run of the commit (no suite to compare with). Provenance records
    (``track_launch_*``, :func:`db.provenance.is_provenance`) are not asked for: adding one to the
    suites must not make every commit measured before it count as unmeasured.
    """
    from db.provenance import is_provenance

    shas = list(dict.fromkeys(shas))
    if not shas:
        return {}
    if versions is None:  # every run counts, one with no results at all too
        counted = session.execute(
            select(Commit.sha, func.count(Run.id))
            .join(Run, Run.commit_id == Commit.id)
            .join(Machine, Machine.id == Run.machine_id)
            .where(Machine.name == machine, Commit.sha.in_(shas))
            .group_by(Commit.sha)
        )
        return {sha: int(n) for sha, n in counted}
    need = {(name, str(v)) for name, v in versions.items() if not is_provenance(name)}
    stmt = (
        select(Commit.sha, Run.id, Benchmark.name, Result.benchmark_version)
        .join(Run, Run.commit_id == Commit.id)
        .join(Machine, Machine.id == Run.machine_id)
        .join(Result, Result.run_id == Run.id)
        .join(Benchmark, Benchmark.id == Result.benchmark_id)
        .where(Machine.name == machine, Commit.sha.in_(shas), Benchmark.name.in_([name for name, _ in need]))
        .distinct()
    )
    held: dict[tuple[str, int], set[tuple[str, str | None]]] = defaultdict(set)
    for sha, run_id, name, version in session.execute(stmt):
        held[(sha, run_id)].add((name, version))
    counts: dict[str, int] = defaultdict(int)
    for (sha, _run), have in held.items():
        if need <= have:
            counts[sha] += 1
    return dict(counts)


def machine_has_runs(engine: Engine, machine: str) -> bool:
    """Whether ``machine`` has a run in the store. The first read of the store's tables: a fault of the
    store itself there (a corrupted page, a missing privilege) raises :class:`db.engine.StoreError`."""
    from db.engine import store_error

    try:
        with Session(engine) as session:
            found = session.execute(
                select(Run.id).join(Machine, Machine.id == Run.machine_id).where(Machine.name == machine).limit(1)
            ).first()
    except DBAPIError as exc:
        err = store_error(exc, engine.url)
        if err is None:
            raise
        raise err from None
    return found is not None
