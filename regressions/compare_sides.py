"""What each side of a comparison reads on one machine (:func:`read_sides`): like with like. Of several asv
versions at a side, only the runs of those both sides measured count; where the sides share an asv environment
of a benchmark and there are several, each environment is a row of its own (asv's compare lists one row an
environment), so a failure or a slowdown in one of them is not hidden in a median over them, and an environment
that head lacks is missing there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from regressions.results import benchmark_runs, last_versions, results_at

# The parameter a row split per asv environment carries (its value: what sets the environment apart).
ENV_PARAM = "asv env"

Versions = dict[str, set[str | None]]


def case_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A row's params without :data:`ENV_PARAM`: the case and series it is of, whichever environment (a declared
    removal's match, its History)."""
    return {k: v for k, v in params.items() if k != ENV_PARAM}


@dataclass(frozen=True)
class Sides:
    """``results_at`` rows of base and head with ``env``: the environment's label on a row of one environment,
    "" where the runs pool; ``versions``: each side's asv versions per benchmark (any status)."""

    base: pd.DataFrame
    head: pd.DataFrame
    versions: tuple[Versions, Versions]


def read_sides(session: Session, base_id: int, head_id: int, machine: str) -> Sides:
    """Both sides' results on ``machine``, like with like (module docstring)."""
    runs_base, runs_head = (benchmark_runs(session, c, machine) for c in (base_id, head_id))
    at_base, at_head = ({name: {v for v, _e in runs} for name, runs in side.items()} for side in (runs_base, runs_head))
    shared = shared_versions(at_base, at_head)  # a side measured at several versions: the ones both have
    # Several shared: one for both sides, the one head measured last (each side's own last could differ).
    several = [name for name, both in shared.items() if len(both) > 1]
    if several:
        shared.update({name: {v} for name, v in last_versions(session, head_id, machine, several).items()})
    # The environments of the runs that count (at the versions kept): a version measured again in another
    # environment is not a second environment of the series.
    envs_base, envs_head = ({name: {e for v, e in runs if name not in shared or v is None or v in shared[name]}
                             for name, runs in side.items()} for side in (runs_base, runs_head))  # fmt: skip
    # One row an environment wherever the sides share one and there are several: an environment only one side
    # has is a row of its own too (base's alone: missing at head, a failure to build it not hidden; head's alone:
    # new). Sides that share none pool their runs: a change of environment is compared as it is, never unjudged.
    split = {name: envs_base[name] | envs_head[name] for name in envs_base.keys() & envs_head.keys()
             if envs_base[name] & envs_head[name] and len(envs_base[name] | envs_head[name]) > 1}
    base, head = (_side(session, c, machine, shared, split) for c in (base_id, head_id))
    return Sides(base, head, (at_base, at_head))


def _side(session: Session, commit_id: int, machine: str, versions: Versions,
          split: Mapping[str, set[str]]) -> pd.DataFrame:
    """One commit's rows: the pooled benchmarks', then those of each environment of a split benchmark."""
    whole = results_at(session, commit_id, machine, versions=versions)
    frames = [whole[~whole["benchmark"].isin(list(split))].assign(env="")]
    labels = env_labels(set().union(*split.values())) if split else {}
    for env in sorted(labels):
        one = {name: {env} for name, envs in split.items() if env in envs}
        part = results_at(session, commit_id, machine, versions=versions, environments=one)
        frames.append(part[part["benchmark"].isin(list(one))].assign(env=labels[env]))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class EnvChange:
    """Benchmarks both sides measured on a machine in no asv environment in common (the runner's Python,
    compilers or libraries changed between them): each side's runs pool, so a change may be the environment's."""

    benchmarks: int  # how many
    total: int  # of the benchmarks both sides measured there
    base: tuple[str, ...]  # the environments their base runs were in
    head: tuple[str, ...]


def environments_apart(session: Session, base_id: int, head_id: int, machine: str) -> EnvChange | None:
    """Where base and head share no asv environment on ``machine``, benchmark by benchmark (one benchmark moved to a
    new Python while another kept the old one hid the first's change: a review); None where every benchmark both
    measured shares one (like is compared with like, one row an environment where several)."""
    at_base, at_head = (benchmark_runs(session, c, machine) for c in (base_id, head_id))
    both = at_base.keys() & at_head.keys()
    envs = {name: ({e for _v, e in at_base[name]}, {e for _v, e in at_head[name]}) for name in both}
    apart = [pair for pair in envs.values() if not pair[0] & pair[1]]
    if not apart:
        return None
    return EnvChange(len(apart), len(both), tuple(sorted(set().union(*(b for b, _h in apart)))),
                     tuple(sorted(set().union(*(h for _b, h in apart)))))


def env_labels(envs: set[str]) -> dict[str, str]:
    """{asv environment name: what sets it apart from the others}: the fewest of its ``-``-separated parts that
    not every environment has, from the first, that tell them apart (``conda-py3.10-numpy1.26`` against
    ``conda-py3.13-numpy2.3``: ``py3.10``), else the whole name."""
    parts = {e: e.split("-") for e in envs}
    common = set.intersection(*(set(p) for p in parts.values())) if len(envs) > 1 else set()
    apart = {e: [p for p in parts[e] if p not in common] for e in envs}
    for k in range(1, max((len(a) for a in apart.values()), default=0) + 1):
        labels = {e: "-".join(apart[e][:k]) for e in envs}
        if all(labels.values()) and len(set(labels.values())) == len(labels):
            return labels
    return {e: e for e in envs}


def shared_versions(at_base: Versions, at_head: Versions) -> Versions:
    """{benchmark: the asv versions both sides have} where a side has several (a commit measured again after a
    version bump holds runs of both): only those runs count, so a side's old code does not move its value. Compare
    pairs like with like here; elsewhere (History, the grid) a commit shows the version it measured last."""
    shared = {}
    for name in at_base.keys() & at_head.keys():
        both = (at_base[name] & at_head[name]) - {None}  # a result without a version pools everywhere
        if both and (at_base[name] != at_head[name] or len(both) > 1):
            shared[name] = both
    return shared
