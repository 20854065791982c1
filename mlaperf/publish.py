"""`mlaperf publish --out DIR`: the store as a static site that needs no server and no network.

Open ``DIR/index.html`` from disk (``file://``), serve the folder from any web server, or push it to GitHub
Pages. The pages (``mlaperf/publish_site/``: one HTML file, its script and its style sheet, copied as they
are) read their data from JavaScript files under ``DIR/data/`` that add themselves to ``window.MLAPERF``:
a browser loads a ``<script>`` from ``file://`` where it refuses ``fetch``. One file per machine (overview
counts, alert groups, the summary grid, throughput) and one per series (its whole history), loaded when a
page needs it; every string in them is made here by the dashboard's own functions (``mlaperf.publish_model``),
so the site reads as the dashboard and the CLI do. Nothing is fetched from another host: no CDN, no web font.

An existing DIR is replaced only when it holds a site this command wrote (its ``.mlaperf-site`` marker);
the new site is written beside it and swapped in, so a failed publish leaves the old one whole.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from regressions.results import LINK_ON, MIN_PREFIX, commit_positions
from regressions.units import plural
from settings import exits
from settings.args import add_db, add_repo_url, add_thresholds_config
from settings.env import store_url

from . import __version__

SITE = Path(__file__).with_name("publish_site")
MARKER = ".mlaperf-site"
ASSETS = ("index.html", "app.js", "style.css")


class PublishError(ValueError):
    """Bad --out or --repo-url; the message names the argument."""


@dataclass(frozen=True)
class Published:
    out: Path
    machines: int
    series: int
    files: int
    bytes: int
    seconds: float

    def line(self) -> str:
        return (f"mlaperf publish: {self.out}/index.html: {plural(self.machines, 'machine')}, {self.series:,} series, "
                f"{self.files:,} files, {self.bytes / 1e6:.1f} MB in {self.seconds:.1f} s "
                "(open it from disk, or serve the folder; no network needed)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "publish",
        help="write the store as a static site (no server, no network): overview, history, throughput, alerts",
        description=(
            "Write the store as a static site that needs no server and no network: open DIR/index.html from "
            "disk (file://), serve the folder from any web server, or push it to GitHub Pages. Pages for every "
            "machine (overview, alerts, the summary grid, throughput, each series' history) read data files under "
            "DIR/data/, made by the dashboard's own formatting. An existing DIR is replaced only when it holds a "
            "site this command wrote; the new site is written beside it and swapped in, so a failed publish leaves "
            "the old one whole. Exit status: 0 written, 2 bad usage or input (an unknown --machine, a folder that "
            "is not a site), 3 internal error."
        ),
    )
    parser.add_argument("--out", metavar="DIR", type=Path, default=Path("site"),
                        help="folder to write (default: ./site); replaced only if it holds an mlaperf site")
    add_db(parser)
    parser.add_argument("--machine", metavar="M", action="append", default=None,
                        help="publish only this machine (repeatable; default: every machine)")
    add_repo_url(parser)
    add_thresholds_config(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr, only the summary")
    parser.set_defaults(func=handle)


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise PublishError(f"--out: {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise PublishError(f"--out: {out} is not empty and holds no mlaperf site ({MARKER}); choose an empty or "
                           "new folder, nothing there is overwritten")
    parent = out.resolve().parent
    if not parent.is_dir():
        raise PublishError(f"--out: no such folder: {parent}")


def _new_folder(out: Path) -> Path:
    """An empty folder beside ``out`` to build the site in, with the mode ``out`` will keep: the existing
    folder's (and its group), else what ``mkdir`` gives under the umask (``tempfile.mkdtemp``'s 0700 would shut
    out a web server running as another user)."""
    for _ in range(100):
        tmp = out.with_name(f".{out.name}.{secrets.token_hex(6)}")
        try:
            tmp.mkdir()
        except FileExistsError:
            continue
        if out.is_dir():
            old = out.stat()
            try:  # its group too: a site served through group permission (www-data) stays readable
                os.chown(tmp, -1, old.st_gid)
            except OSError:
                pass  # not a member of that group: the mode still applies
            tmp.chmod(stat.S_IMODE(old.st_mode))
        return tmp
    raise FileExistsError(f"no free temporary folder name beside {out}")


def _script(key: str, payload: Any) -> str:
    """A data file: ``MLAPERF.put("key", {...})`` (the page defines ``MLAPERF.put``). ``</`` is escaped so no
    text (a commit message) can end a script element."""
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False, ensure_ascii=False).replace("</", "<\\/")
    return f"MLAPERF.put({json.dumps(key)},{text});\n"


def _write(path: Path, text: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(data)
    return len(data)


Progress = Callable[[str], None]


def build(session: Session, out: Path, *, machines: list[str] | None = None, repo_url: str = "",
          settings: Any = None, progress: Progress | None = None) -> tuple[int, int, int, int]:
    """Write the site into the empty folder ``out``; returns (machines, series, files, bytes). ``progress``
    gets a line as each machine starts and ends (reading its histories is most of a big store's minute)."""
    from dashboard import machines as machine_rule
    from db import queries
    from regressions.config import Settings

    from .publish_ids import machine_folder
    from .publish_model import Links, machine_site, series_ids

    settings = settings or Settings()
    known = machine_rule.order(queries.machines(session))
    unknown = [m for m in machines or () if m not in known]
    if unknown:
        raise PublishError(f"--machine: {machine_rule.unknown(unknown[0], sorted(known))}")
    # In the dashboard's order (``dashboard.machines``): the overview opens on the first, as the dashboard does.
    wanted = [m for m in known if not machines or m in machines]
    files = nbytes = n_series = 0
    listed = []
    # Which machines measured each series: a History page offers those to overlay (their files hold the values).
    ids = {machine_folder(name): series_ids(session, name) for name in wanted}
    order = commit_positions(session)  # every commit's place in history: one axis for History's overlays
    say = progress or (lambda _: None)
    for i, name in enumerate(wanted, 1):
        start, before = time.perf_counter(), files
        say(f"publish: {name} ({i} of {len(wanted)}): reading its overview, alerts and series' histories")
        folder = machine_folder(name)
        site = machine_site(session, name, settings, Links(folder, repo_url), order)
        nbytes += _write(out / "data" / folder / "index.js", _script(f"{folder}/index", site.index))
        files += 1
        for sid, history in site.histories.items():
            history["elsewhere"] = [f for f, theirs in ids.items() if f != folder and sid in theirs]
            nbytes += _write(out / "data" / folder / f"s{sid}.js", _script(f"{folder}/s{sid}", history))
            files += 1
        n_series += len(site.index["grid"])
        gpu = str(queries.machine_info(session, name).get("gpu_name") or "")
        listed.append({"folder": folder, "label": f"{name} ({gpu})" if gpu and gpu != "none" else name})
        say(f"publish: {name} ({i} of {len(wanted)}): {len(site.index['grid']):,} series, {files - before:,} files "
            f"in {time.perf_counter() - start:.1f} s")
    meta = {"machines": listed, "min_prefix": MIN_PREFIX,  # the commit prefix the dashboard and the CLI accept
            "link_on": list(LINK_ON),  # what ?all= may say for on, as the dashboard reads it
            "footer": f"Published {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by mlaperf {__version__}"
                      " · static: no server, no network",
            "empty": "The store held no results when this site was published."}
    nbytes += _write(out / "data" / "site.js", _script("site", meta))
    for asset in ASSETS:
        nbytes += _write(out / asset, (SITE / asset).read_text(encoding="utf-8"))
    (out / MARKER).write_text(f"mlaperf {__version__}\n", encoding="utf-8")
    (out / ".nojekyll").write_text("", encoding="utf-8")  # GitHub Pages: serve data/ as is
    return len(listed), n_series, files + len(ASSETS) + 1, nbytes


def _not_writable(out: Path, exc: OSError) -> PublishError:
    # The site is built in a new folder beside --out and swapped in, so it is --out's folder that must be writable.
    return PublishError(f"--out: {exc.strerror or exc}: {exc.filename or out} (the site is built beside {out} and "
                        f"swapped in: {out.parent} must be writable by this user)")


def publish(url: str, out: Path, *, machines: list[str] | None = None, repo_url: str = "",
            settings: Any = None, progress: Progress | None = None) -> Published:
    """Build the site beside ``out`` and swap it in (the old site, if any, stays until the new one is whole);
    ``progress``: see :func:`build`."""
    from db.engine import check_schema, make_engine

    t0 = time.perf_counter()
    _check_out(out)
    engine = make_engine(url, readonly=True)
    check_schema(engine)
    out = out.resolve()
    try:
        tmp = _new_folder(out)
    except PermissionError as exc:
        raise _not_writable(out, exc) from exc
    try:
        with Session(engine) as s:
            n_machines, n_series, files, nbytes = build(s, tmp, machines=machines, repo_url=repo_url,
                                                        settings=settings, progress=progress)
        old = None
        try:
            if out.exists():
                old = out.with_name(f".{out.name}.old-{time.time_ns()}")
                out.rename(old)
            tmp.rename(out)
        except PermissionError as exc:
            raise _not_writable(out, exc) from exc
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        engine.dispose()
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return Published(out, n_machines, n_series, files, nbytes, time.perf_counter() - t0)


def handle(args: argparse.Namespace) -> int:
    from dashboard.gitremote import default_repo_url
    from regressions.config import ConfigError, load_settings

    url = store_url(args.db)
    try:
        settings = load_settings(args.config)
        repo = (args.repo_url if args.repo_url is not None else default_repo_url(Path.cwd())).rstrip("/")
        if repo and not repo.startswith(("https://", "http://")):
            raise PublishError(f"--repo-url: {repo!r} is not an http(s) URL")
        say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
        done = publish(url, args.out, machines=args.machine, repo_url=repo, settings=settings, progress=say)
    except (PublishError, ConfigError, ValueError) as exc:
        print(f"mlaperf publish: error: {exc}", file=sys.stderr)
        return exits.USAGE
    print(done.line())
    return exits.OK
