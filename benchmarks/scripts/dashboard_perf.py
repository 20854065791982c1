"""Dashboard speed at scale, measured in headless Chromium: each page's first render and a widget change.

Seeds a store with COMMITS commits x 552 series of the sparse-MLA suites (real asv v2 files written by asv's
own ``Results.save``, ingested by ``db.ingest``; an MMA slowdown near the newest commit that ``mlaperf detect``
flags), plus a second, small machine. Then, per repeat, starts ``mlaperf dashboard`` on that store, opens
every page once (the server has imported its modules, as one that has been used), and for every page:

1. drops the cached data (the sidebar's "Reload data", what happens when the loaders' five-minute cache
   expires) from another page, which caches again the loaders every page shares,
2. opens the page in a new tab (a new session; the page's own data uncached) and times it: from navigation
   to the server's ``script_finished`` message on the websocket and every chart of the run drawn,
3. changes one widget (one that loads new data where the page has one) and times it the same way, from
   the moment the new value is committed (a selectbox is opened and typed into first, untimed).

Pages: Overview (with its summary grid), All benchmarks, Throughput, History, History and Throughput with
the small machine overlaid (``history_vs``, ``throughput_vs``), Regressions, Compare, Efficiency.

The same is timed for a trivial Streamlit page (a title and a 3-row table): the floor of any page here.

Targets (issues 17 and 28): first render <= 1.5 s, widget change <= 1 s. Nothing here is a test; it reports.

    python -m benchmarks.scripts.dashboard_perf                      # 1,000 commits, temporary store
    python -m benchmarks.scripts.dashboard_perf --db sqlite:////tmp/big.sqlite --keep
    python -m benchmarks.scripts.dashboard_perf --db sqlite:////tmp/big.sqlite --no-seed --repeats 5

Exit status: 0 every median within target, 1 some page over target, 2 bad usage, 3 a page failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dashboard.served import Watcher

ROOT = Path(__file__).resolve().parents[2]
MACHINE = "h200-sxm"
SMALL_MACHINE = "rtx-pro-6000"
FIRST_TARGET_S = 1.5
CHANGE_TARGET_S = 1.0
CHROMIUM = "/usr/bin/chromium"


def _synth() -> Any:
    """tests/dashboard/asv_synth.py, the dashboard tests' writer of real asv result files."""
    path = ROOT / "tests" / "dashboard" / "asv_synth.py"
    spec = importlib.util.spec_from_file_location("asv_synth", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def seed(url: str, workdir: Path, commits: int) -> int:
    """Write, ingest and detect the synthetic history; returns the number of series of the big machine (as
    the dashboard lists them: without the kernel-config records)."""
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.provenance import is_provenance

    synth = _synth()
    benches = synth.mla_benchmarks(
        concurrency=(1, 2, 4, 8, 16, 32, 64, 128), topk=(128, 512, 2048), context=(4096, 16384, 65536),
        slow_from=commits - 6,
    )
    shas = synth.commit_shas(commits, seed="perf")
    results = workdir / "results"
    t0 = time.perf_counter()
    # The kernel-config records (track_launch_*) are written like series but are not listed as series.
    measured = synth.count_series([b for b in benches if not is_provenance(b.name)])
    print(f"writing {commits:,} asv result files x {measured} series "
          f"(and {synth.count_series(benches) - measured} kernel-config records) ...", flush=True)
    synth.write_results(results, MACHINE, benches, shas)
    small = synth.mla_benchmarks(concurrency=(1, 64), topk=(512,), context=(4096,))
    synth.write_results(results, SMALL_MACHINE, small, shas[-20:],
                        gpu={**synth.GPU_PARAMS, "gpu_name": "NVIDIA RTX PRO 6000 Blackwell", "gpu_cc": "12.0"})
    print(f"  written in {time.perf_counter() - t0:.1f} s; ingesting ...", flush=True)
    upgrade(url)
    engine = make_engine(url)
    summary = ingest_paths(engine, [results], progress=True)
    engine.dispose()
    print("  " + summary.line(), flush=True)
    t0 = time.perf_counter()
    first = _detect(url)
    print(f"  detect --full in {time.perf_counter() - t0:.1f} s: {first}", flush=True)
    return int(measured)


def _detect(url: str) -> str:
    """``mlaperf detect --full`` on the store; its first line of output. A status other than 0 or 1 (the
    detector failed: the pages would be measured without the seeded alerts) raises with its stderr."""
    out = subprocess.run([sys.executable, "-m", "mlaperf.cli", "detect", "--full", "--db", url], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"mlaperf detect --full exited {out.returncode}: {out.stderr.strip()[-2000:]}")
    return (out.stdout.strip().splitlines() or [""])[0]


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and its live descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        stats[pid] = (ppid, (int(fields[11]) + int(fields[12])) / tick)
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, []))
    return total


def _open_select(page: Any, label: str, text: str) -> None:
    """Open the selectbox labelled ``label`` and type ``text`` (not timed: the user is still choosing)."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
    box.locator("input").click()
    box.locator("input").fill(text)


def _enter(page: Any) -> None:
    page.keyboard.press("Enter")


def _radio(page: Any, label: str, option: str) -> None:
    group = page.locator('[data-testid="stRadio"]').filter(has_text=label).first
    group.get_by_text(option, exact=True).click()


def _toggle(page: Any, label: str) -> None:
    page.locator('[data-testid="stCheckbox"]').filter(has_text=label).first.click()


def _fill(page: Any, label: str, text: str) -> None:
    page.get_by_label(label).fill(text)


def _nothing(page: Any, shas: list[str]) -> None:
    return None


# page -> (path to open, what the change does, preparation (not timed), the change itself (timed from here))
Action = Callable[[Any, list[str]], None]
PAGES: dict[str, tuple[str, str, Action, Action]] = {
    "overview": ("", "machine -> the small machine", lambda p, s: _open_select(p, "Machine", SMALL_MACHINE),
                 lambda p, s: _enter(p)),
    "summary": ("summary", "search 'time_decode mma 64'",
                lambda p, s: _fill(p, "Search benchmarks and parameters", "time_decode mma 64"),
                lambda p, s: _enter(p)),
    "throughput": ("throughput", "top-k 512 -> 2048", _nothing, lambda p, s: _radio(p, "topk", "2048")),
    "history": ("history", "benchmark -> track_tokens_per_s",
                lambda p, s: _open_select(p, "Benchmark", "SparseDecodeMetrics.track_tokens_per_s"),
                lambda p, s: _enter(p)),
    "history_vs": (f"history?hist_vs={SMALL_MACHINE}", "benchmark -> track_tokens_per_s (machine overlaid)",
                   lambda p, s: _open_select(p, "Benchmark", "SparseDecodeMetrics.track_tokens_per_s"),
                   lambda p, s: _enter(p)),
    "throughput_vs": (f"throughput?tp_vs={SMALL_MACHINE}", "top-k 512 -> 2048 (machine overlaid)", _nothing,
                      lambda p, s: _radio(p, "topk", "2048")),
    "regressions": ("regressions", "all machines on", _nothing, lambda p, s: _toggle(p, "All machines")),
    "compare": ("compare", "base -> 10 commits earlier", lambda p, s: _open_select(p, "Base (before)", s[-11][:8]),
                lambda p, s: _enter(p)),
    "efficiency": ("efficiency", "commit -> the one before", lambda p, s: _open_select(p, "Commit", s[-2][:8]),
                   lambda p, s: _enter(p)),
}
WARMUP = {"overview": "efficiency"}
# A page with a title and a three-row table: what any Streamlit page costs here (frontend boot, session,
# websocket), the floor under every figure above.
TRIVIAL_APP = 'import streamlit as st\nst.title("floor")\nst.dataframe({"a": [1, 2, 3]})\n'


def floor(workdir: Path, chromium: str, repeats: int) -> list[tuple[float, float]]:
    """First render of a trivial Streamlit page in a new tab: (seconds, CPU seconds) per repeat."""
    from playwright.sync_api import sync_playwright

    from dashboard.serve import free_port
    from dashboard.served import CHROMIUM_ARGS, Watcher, wait_serving

    app = workdir / "trivial_app.py"
    app.write_text(TRIVIAL_APP)
    port = free_port("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
                             "--server.port", str(port), "--browser.gatherUsageStats", "false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    out = []
    try:
        wait_serving(base, proc, "trivial Streamlit app")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1500, "height": 1000})
            warm = context.new_page()
            watch = Watcher(warm)
            warm.goto(base)
            watch.wait_run(warm, 0)
            warm.close()
            for _ in range(repeats):
                page = context.new_page()
                watch = Watcher(page)
                cpu0 = _tree_cpu(os.getpid())
                t0 = time.perf_counter()
                page.goto(base, wait_until="commit")
                watch.wait_run(page, 0)
                out.append((time.perf_counter() - t0, _tree_cpu(os.getpid()) - cpu0))
                page.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return out


def _goto(page: Any, watch: Watcher, url: str) -> None:
    before = watch.begin()
    page.goto(url, wait_until="commit")
    watch.wait_run(page, before)


def measure(url: str, shas: list[str], repeats: int, chromium: str,
            pages: list[str]) -> dict[str, tuple[list[float], ...]]:
    """Per repeat: a fresh server, every page opened once (modules imported, as on a server that has been
    used), then for each page: the cached data dropped (the sidebar's "Reload data", as when the loaders'
    five-minute cache expires) from another page, which caches the loaders all pages share again; the
    page opened in a new tab and timed; one widget changed and timed."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Served, Watcher

    # page -> (first render s, widget change s, first render CPU s, widget change CPU s)
    out: dict[str, tuple[list[float], ...]] = {name: ([], [], [], []) for name in pages}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for rep in range(repeats):
            server = Served(url)
            try:
                context = browser.new_context(viewport={"width": 1500, "height": 1000})
                warm = context.new_page()
                warm_watch = Watcher(warm)
                for name in PAGES:
                    _goto(warm, warm_watch, f"{server.base}/{PAGES[name][0]}")
                for name in pages:
                    path, what, prepare, change = PAGES[name]
                    _goto(warm, warm_watch, f"{server.base}/{WARMUP.get(name, '')}")
                    before = warm_watch.begin()
                    warm.get_by_role("button", name="Reload data").click()
                    warm_watch.wait_run(warm, before)

                    page = context.new_page()
                    watch = Watcher(page)
                    cpu0 = _tree_cpu(os.getpid())  # this process's tree: the server and the browser
                    t0 = time.perf_counter()
                    page.goto(f"{server.base}/{path}", wait_until="commit")
                    run_end = watch.wait_run(page, 0)
                    first = time.perf_counter() - t0
                    first_run = run_end - t0
                    first_cpu = _tree_cpu(os.getpid()) - cpu0
                    page.wait_for_timeout(300)  # let the URL settle before touching a widget
                    prepare(page, shas)
                    page.wait_for_timeout(300)
                    before = watch.begin()
                    cpu0 = _tree_cpu(os.getpid())
                    t0 = time.perf_counter()
                    change(page, shas)
                    run_end = watch.wait_run(page, before)
                    changed = time.perf_counter() - t0
                    changed_run = run_end - t0
                    changed_cpu = _tree_cpu(os.getpid()) - cpu0
                    page.close()
                    out[name][0].append(first)
                    out[name][1].append(changed)
                    out[name][2].append(first_cpu)
                    out[name][3].append(changed_cpu)
                    print(f"[{rep + 1}/{repeats}] {name:<12} first render {first:5.2f} s (run done at "
                          f"{first_run:.2f} s, {first_cpu:.2f} CPU s)   {what}: {changed:5.2f} s (run done at "
                          f"{changed_run:.2f} s, {changed_cpu:.2f} CPU s)", flush=True)
                context.close()
            finally:
                server.stop()
        browser.close()
    return out


def add_store_options(parser: argparse.ArgumentParser, *, repeats_help: str, keep_help: str) -> None:
    """The options of a script that times pages over a seeded store (this one and publish_perf)."""
    parser.add_argument("--commits", type=int, default=1000, help="commits to seed (default 1000)")
    parser.add_argument("--db", default=None, help="store URL; seeded unless --no-seed (default: a temporary file)")
    parser.add_argument("--no-seed", action="store_true", help="use the store at --db as it is")
    parser.add_argument("--repeats", type=int, default=3, help=repeats_help)
    parser.add_argument("--keep", action="store_true", help=keep_help)
    parser.add_argument("--chromium", default=CHROMIUM, help=f"Chromium binary (default {CHROMIUM})")


def check_store_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Bad values of ``add_store_options``' options end the script with exit 2, naming the option."""
    if args.no_seed and not args.db:
        parser.error("--no-seed needs --db")
    if args.commits < 20:
        parser.error("--commits must be at least 20")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not Path(args.chromium).exists():
        parser.error(f"--chromium: {args.chromium} does not exist")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_store_options(parser, repeats_help="measurements per page (default 3)",
                      keep_help="keep the temporary folder with the seeded store")  # fmt: skip
    parser.add_argument("--page", action="append", choices=list(PAGES), default=None,
                        help="measure only this page (repeatable; default: every page)")
    args = parser.parse_args(argv)
    check_store_options(parser, args)

    workdir = Path(tempfile.mkdtemp(prefix="mlaperf-dashperf-"))
    url = args.db or f"sqlite:///{workdir / 'store.sqlite'}"
    try:
        if not args.no_seed:
            n = seed(url, workdir, args.commits)
            print(f"seeded {args.commits:,} commits x {n} series into {url}", flush=True)
        from sqlalchemy.orm import Session

        from db import queries
        from db.engine import make_engine

        engine = make_engine(url, readonly=True)
        with Session(engine) as s:
            shas = list(queries.commits(s, MACHINE)["sha"])
        engine.dispose()
        if len(shas) < 12:
            print(f"dashboard_perf: machine {MACHINE} needs 12+ commits in {url}", file=sys.stderr)
            return 2
        times = measure(url, shas, args.repeats, args.chromium, args.page or list(PAGES))
        base = floor(workdir, args.chromium, args.repeats)
    except Exception as exc:  # noqa: BLE001 - one line, exit 3
        print(f"dashboard_perf: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    finally:
        if args.keep:
            print(f"kept {workdir}")
        elif not args.db:
            shutil.rmtree(workdir, ignore_errors=True)

    load = os.getloadavg()
    print(f"\n{len(shas):,} commits on {MACHINE}; median of {args.repeats}; {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min); targets: first render <= {FIRST_TARGET_S} s, "
          f"widget change <= {CHANGE_TARGET_S} s. CPU s: server + browser processes over the same interval.")
    print(f"{'page':<12} {'first render':>13} {'(CPU s)':>8} {'widget change':>14} {'(CPU s)':>8}  change")
    print(f"{'(floor)':<12} {statistics.median(t for t, _ in base):>11.2f} s "
          f"{statistics.median(c for _, c in base):>8.2f} {'':>14} {'':>8}  a trivial Streamlit page, same setup")
    ok = True
    for name, (first, changed, first_cpu, changed_cpu) in times.items():
        f, c = statistics.median(first), statistics.median(changed)
        ok &= f <= FIRST_TARGET_S and c <= CHANGE_TARGET_S
        flag = ("" if f <= FIRST_TARGET_S else " first SLOW") + ("" if c <= CHANGE_TARGET_S else " change SLOW")
        print(f"{name:<12} {f:>11.2f} s {statistics.median(first_cpu):>8.2f} {c:>12.2f} s "
              f"{statistics.median(changed_cpu):>8.2f}  {PAGES[name][1]}{flag}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
