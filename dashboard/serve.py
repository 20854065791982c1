"""``mlaperf dashboard``: check the store, then serve the Streamlit app headless."""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import make_url

from dashboard import store_check
from settings import env, exits
from settings.args import add_db, add_repo_url

APP = Path(__file__).with_name("app.py")
ASGI_APP = Path(__file__).with_name("asgi.py")  # APP in st.App, with the page HTML's backend hint
DEFAULT_PORT = 8501


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dashboard",
        help="serve the Streamlit dashboard (read-only by default)",
        description="Serve the mlaperf dashboard: throughput vs concurrency, history, regressions, "
        "commit comparison and efficiency, read from the store. Runs `streamlit run` headless and "
        "prints the URL; Ctrl-C stops it.",
    )
    add_arguments(parser)
    parser.set_defaults(func=handle)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_db(parser)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it on the network)")
    parser.add_argument("--writable", action="store_true",
                        help="allow acknowledging/ignoring regressions from the dashboard")
    parser.add_argument("--machine", default=None, metavar="NAME",
                        help="machine the pages open on (default: the one with the newest run; a link's ?machine= "
                        "wins)")
    add_repo_url(parser)


def absolute_url(url: str) -> str:
    """Make a relative SQLite path absolute, so the server's working directory does not matter."""
    path = store_check.sqlite_path(url)
    u = make_url(url)
    if path is None or path.is_absolute() or str(u.database).startswith("file:"):
        return url
    return u.set(database=str(path.expanduser().resolve())).render_as_string(hide_password=False)


def _address(host: str, port: int) -> tuple[int, tuple]:
    """(address family, socket address) of ``host`` (an IPv4 or IPv6 address, or a name) for a server."""
    family, _, _, _, address = socket.getaddrinfo(host or "0.0.0.0", port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)[0]
    return family, address


def free_port(host: str) -> int:
    family, address = _address(host, 0)
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind(address)
        return int(s.getsockname()[1])


def bind_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (None: it can; port 0 checks the host alone), by the
    bind's errno: a port in use, a privileged port, or a --host that is no address of this machine."""
    try:
        family, address = _address(host, port)
    except (socket.gaierror, UnicodeError) as exc:
        return f"--host {host!r} is not an address or a host name this machine can resolve ({exc})"
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"{host}:{port} is already in use (choose another --port)"
            if exc.errno == errno.EACCES:
                return f"port {port} on {host} needs privileges this user lacks (choose a --port above 1023)"
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"--host {host} is not an address of this machine (use 127.0.0.1, 0.0.0.0 or one of its own)"
            return f"cannot listen on --host {host} --port {port}: {exc.strerror or exc}"
    return None


def machine_problem(url: str, machine: str) -> str | None:
    """Why ``--machine`` cannot be opened: a name the store does not have (``dashboard.machines``' words)."""
    from sqlalchemy.orm import Session

    from dashboard import machines
    from db import queries

    engine = store_check.open_engine(url)
    try:
        with Session(engine) as s:
            known = sorted(queries.machines(s)["name"].astype(str))
    finally:
        engine.dispose()
    return None if machine in known else f"--machine: {machines.unknown(machine, known)}"


def app_script() -> Path:
    """What ``streamlit run`` serves: ``asgi.py`` where the installed Streamlit has ``st.App``, else ``app.py``
    itself (pages opened at their own address then connect a retry delay later). Read from Streamlit's files,
    not imported: this process only starts the server."""
    spec = importlib.util.find_spec("streamlit")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    module = origin.parent / "web" / "server" / "starlette" / "starlette_app.py" if origin else None
    has_app = module is not None and module.is_file() and "\nclass App" in module.read_text(encoding="utf-8")
    return ASGI_APP if has_app else APP


def streamlit_command(host: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "streamlit", "run", str(app_script()),
        "--server.headless", "true",
        "--server.address", host,
        "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--client.toolbarMode", "viewer",
        # Streamlit's default full collection after every run holds the GIL for a tenth of a second or more
        # over this server's heap (pandas, SQLAlchemy, cached frames), delaying the run's end on every page
        # load and widget change; Python's own generational collection still runs.
        "--runner.postScriptGC", "false",
    ]


def handle(args: argparse.Namespace) -> int:
    url = env.store_url(args.db)
    try:
        store_check.validate_url(url)
    except store_check.BadStoreURL as exc:
        print(f"mlaperf dashboard: error: {exc}", file=sys.stderr)
        return exits.USAGE
    url = absolute_url(url)
    if not 0 <= args.port <= 65535:
        print(f"mlaperf dashboard: error: --port {args.port} is not a port (0..65535)", file=sys.stderr)
        return exits.USAGE
    status = store_check.check(url)
    if status.state in ("error", "outdated"):
        print(f"mlaperf dashboard: error: {status.message}", file=sys.stderr)
        return exits.USAGE
    if status.state in ("missing", "empty"):
        print(f"mlaperf dashboard: note: {status.message} The dashboard explains how to ingest "
              f"(`mlaperf ingest .asv/results --db {store_check.redact(url)}`).", file=sys.stderr)
    problem = machine_problem(url, args.machine) if args.machine and status.state == "ok" else None
    problem = problem or bind_problem(args.host, args.port)
    if problem:
        print(f"mlaperf dashboard: error: {problem}", file=sys.stderr)
        return exits.USAGE
    port = args.port or free_port(args.host)

    child = dict(os.environ)  # the app reads these through settings.env
    child[env.DB.name] = url
    child[env.DASHBOARD_WRITABLE.name] = "1" if args.writable else "0"
    if args.repo_url is not None:
        child[env.REPO_URL.name] = args.repo_url
    if args.machine:
        child[env.DASHBOARD_MACHINE.name] = args.machine
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
    mode = "writable" if args.writable else "read-only"
    print(f"mlaperf dashboard: http://{shown_host}:{port}  (store {store_check.redact(url)}, {mode}; Ctrl-C stops)",
          flush=True)
    proc = subprocess.Popen(streamlit_command(args.host, port), env=child)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        return exits.OK


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m dashboard.serve``), same options as ``mlaperf dashboard``."""
    parser = argparse.ArgumentParser(prog="mlaperf dashboard", description="Serve the mlaperf dashboard.")
    add_arguments(parser)
    return exits.dispatch(handle, parser.parse_args(argv), prog="mlaperf dashboard")


if __name__ == "__main__":
    raise SystemExit(main())
