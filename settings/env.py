"""The environment contract: every ``MLAPERF_*`` variable a product module reads, what it means, its
default, and its one reader here (product modules call these readers instead of ``os.environ``).

Commands set some of them for the processes they start (``mlaperf run`` sets ``MLAPERF_TIER`` and
``MLAPERF_CONCURRENCY`` for asv's benchmark processes; ``mlaperf dashboard`` sets ``MLAPERF_DB`` and the
``MLAPERF_DASHBOARD_*`` ones for Streamlit). ``python -m settings.env`` prints the table.

Standard library only, and no import of another module of the project.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Var:
    """An environment variable of the contract: its name, what it means, its default as documented."""

    name: str
    meaning: str
    default: str = "unset"

    def get(self) -> str | None:
        """The value in this process's environment, or None when unset."""
        return os.environ.get(self.name)


DEFAULT_STORE_URL = "sqlite:///.mlaperf/mlaperf.sqlite"
# The kernels' architecture profiles (mla_kernels.arch.ARCH_PROFILES is this tuple): defined here, where the
# variable naming one is read without importing torch.
ARCH_PROFILES = ("native", "sm_90", "sm_120")
TIERS = ("gpu", "cpu")

DB = Var("MLAPERF_DB", "the store's SQLAlchemy URL, what --db means when not given", DEFAULT_STORE_URL)
DEBUG = Var("MLAPERF_DEBUG", "1: an internal error (exit 3) prints its traceback", "0")
TIER = Var("MLAPERF_TIER", "tier of a benchmark process: gpu (the grid) or cpu (the smoke tier)",
           "probed: gpu when a CUDA torch and a GPU are present")  # fmt: skip
CONCURRENCY = Var("MLAPERF_CONCURRENCY", "comma-separated subset of the suites' concurrency grid", "the whole grid")
ARCH_PROFILE = Var("MLAPERF_ARCH_PROFILE", f"MMA configs a launch that names none uses: {', '.join(ARCH_PROFILES)}",
                   "native")  # fmt: skip
CEILINGS_FILE = Var("MLAPERF_CEILINGS_FILE", "JSON cache of the measured copy bandwidth and matmul rate per device "
                    "(0: none)",
                    "~/.cache/mlaperf/ceilings.json")  # fmt: skip
AUTOTUNE_CACHE = Var("MLAPERF_AUTOTUNE_CACHE", "JSON cache of tuned decode configs (0: none); read by mla_kernels",
                     "~/.cache/mlaperf/autotune.json")  # fmt: skip
COMPILE_CACHE = Var("MLAPERF_COMPILE_CACHE", "JSON cache of compiled-kernel statistics (0: none); read by mla_kernels",
                    "~/.cache/mlaperf/compile.json")  # fmt: skip
PDL = Var("MLAPERF_PDL", "0: the kernels launch without programmatic dependent launch (sm_90 and later); read by "
          "mla_kernels", "1")  # fmt: skip
# Commits that fit the nightly job's time limit on the full GPU grid (docs/operations.md, "The nightly").
DEFAULT_NIGHT_BUDGET = 20
NIGHT_BUDGET = Var("MLAPERF_NIGHT_BUDGET", "commits the nightly measures per night (`nightly plan --budget`)",
                   str(DEFAULT_NIGHT_BUDGET))  # fmt: skip
REPO_URL = Var("MLAPERF_REPO_URL", "repository web URL of commit links (set and empty: no links)",
               "the git remote origin, as https")  # fmt: skip
DASHBOARD_URL = Var("MLAPERF_DASHBOARD_URL", "dashboard link in the nightly's issues", "no link")
DASHBOARD_WRITABLE = Var("MLAPERF_DASHBOARD_WRITABLE", "1: the dashboard shows acknowledge/ignore buttons "
                         "(`mlaperf dashboard --writable`)", "0")  # fmt: skip
DASHBOARD_MACHINE = Var("MLAPERF_DASHBOARD_MACHINE", "machine the dashboard's pages open on "
                        "(`mlaperf dashboard --machine`)", "the machine with the newest run")  # fmt: skip
DEFAULT_BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN writes as (settings.pr_contract.BOT_LOGIN)
BOT_LOGIN = Var("MLAPERF_BOT_LOGIN", "GitHub login whose PR comment and alert issues mlaperf edits",
                DEFAULT_BOT_LOGIN)  # fmt: skip

# Read by the nightly's and the pull request's scripts (scripts/nightly.sh, scripts/pr.sh), not by Python.
MACHINE = Var("MLAPERF_MACHINE", "asv machine name of the nightly's and PR's runs (`mlaperf run --machine`)",
              "this host's name ('-cpu' appended on the CPU tier)")  # fmt: skip
RUN_TIER = Var("MLAPERF_RUN_TIER", "tier of the nightly's and PR's runs (`mlaperf run --tier`: auto, gpu, cpu)",
               "auto")  # fmt: skip
NIGHT_DIR = Var("MLAPERF_NIGHT_DIR", "where scripts/nightly.sh keeps a night's plan, results and reports",
                "artifacts/nightly")  # fmt: skip
PR_DIR = Var("MLAPERF_PR_DIR", "where scripts/pr.sh keeps a pull request's results and report", "artifacts/pr")

VARIABLES: tuple[Var, ...] = (
    DB, DEBUG, TIER, CONCURRENCY, ARCH_PROFILE, CEILINGS_FILE, AUTOTUNE_CACHE, COMPILE_CACHE, PDL, NIGHT_BUDGET,
    REPO_URL, DASHBOARD_URL, DASHBOARD_WRITABLE, DASHBOARD_MACHINE, BOT_LOGIN, MACHINE, RUN_TIER, NIGHT_DIR, PR_DIR,
)  # fmt: skip

_TRUE = ("1", "true", "yes")
# Triton's own switch (not ours, so not in VARIABLES): kernels run on the CPU through its interpreter. Triton
# reads it when a kernel is decorated, so it must be set before the first import of a kernel module.
TRITON_INTERPRET = "TRITON_INTERPRET"


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter."""
    return os.environ.get(TRITON_INTERPRET, "0") not in ("", "0")


def use_interpreter() -> None:
    """Run this process's kernels under Triton's interpreter (the CPU tier, a script's ``--smoke``); call it
    before anything imports a kernel module."""
    os.environ[TRITON_INTERPRET] = "1"


def tier_environment(tier: str) -> dict[str, str]:
    """What a benchmark process of ``tier`` needs in its environment: the tier, and on the CPU the interpreter."""
    return {TIER.name: tier, **({TRITON_INTERPRET: "1"} if tier == "cpu" else {})}


def store_url(requested: str | None = None) -> str:
    """The store's URL, the one rule of every command: ``--db`` when given, else ``MLAPERF_DB``, else the
    SQLite file ``.mlaperf/mlaperf.sqlite`` under the current directory."""
    return requested or DB.get() or DEFAULT_STORE_URL


def debug() -> bool:
    return DEBUG.get() == "1"


def tier() -> str | None:
    """The tier ``mlaperf run`` chose for this benchmark process, or None when unset; ValueError for a
    value that is neither gpu nor cpu."""
    value = (TIER.get() or "").strip().lower()
    if not value:
        return None
    if value not in TIERS:
        raise ValueError(f"{TIER.name} must be 'gpu' or 'cpu', got {TIER.get()!r}")
    return value


def parse_concurrency(raw: str, source: str = CONCURRENCY.name) -> list[int]:
    """The positive integers of a comma-separated list such as ``1,16,64``: the one reading of ``--concurrency``
    (``mlaperf run``) and of ``MLAPERF_CONCURRENCY``; ValueError naming ``source`` otherwise."""
    try:
        values = [int(v) for v in raw.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise ValueError(f"{source} {raw!r}: expected comma-separated positive integers, e.g. 1,16,64")
    return values


def concurrency(default: list[int]) -> list[int]:
    """The concurrency grid: ``default``, or the subset ``MLAPERF_CONCURRENCY=1,16,64`` names."""
    raw = (CONCURRENCY.get() or "").strip()
    return parse_concurrency(raw) if raw else list(default)


def pdl() -> bool:
    """Whether the kernels may launch with programmatic dependent launch (``MLAPERF_PDL``, default on)."""
    return (PDL.get() or "").strip() != "0"


def arch_profile() -> str:
    """The architecture profile kernels use when a caller names none (default ``native``); ValueError for a
    value the kernels would reject, so no run records it."""
    value = (ARCH_PROFILE.get() or "").strip() or "native"
    if value not in ARCH_PROFILES:
        raise ValueError(f"{ARCH_PROFILE.name}={value!r} is not one of {', '.join(ARCH_PROFILES)}")
    return value


def cache_file(var: Var, filename: str) -> Path | None:
    """Where a cache named by ``var`` lives: its value when set, None when it is ``0`` (the cache is off), else
    ``~/.cache/mlaperf/<filename>`` (``$XDG_CACHE_HOME`` honoured). The one rule of every mlaperf cache file."""
    value = (var.get() or "").strip()
    if value == "0":
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlaperf" / filename


def ceilings_file() -> Path | None:
    """Where measured device ceilings are kept (``MLAPERF_CEILINGS_FILE``; ``0``: not kept, measured each time)."""
    return cache_file(CEILINGS_FILE, "ceilings.json")


def night_budget() -> str:
    """The nightly's commit budget as text: argparse converts it, so a bad value (an empty one too) is that
    command's usage error."""
    value = NIGHT_BUDGET.get()
    return str(DEFAULT_NIGHT_BUDGET) if value is None else value


def repo_url() -> str | None:
    """Commit links' base when ``MLAPERF_REPO_URL`` is set (an empty value: no links), else None."""
    value = REPO_URL.get()
    return None if value is None else value.strip().rstrip("/")


def dashboard_url() -> str:
    return DASHBOARD_URL.get() or ""


def dashboard_writable() -> bool:
    return (DASHBOARD_WRITABLE.get() or "") in _TRUE


def dashboard_machine() -> str | None:
    return DASHBOARD_MACHINE.get() or None


def bot_login() -> str:
    return BOT_LOGIN.get() or DEFAULT_BOT_LOGIN


def main() -> int:
    """Print the contract: name, default, meaning."""
    width = max(len(v.name) for v in VARIABLES)
    for v in VARIABLES:
        print(f"{v.name:<{width}}  {v.meaning} (default: {v.default})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
