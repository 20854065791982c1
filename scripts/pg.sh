#!/usr/bin/env bash
# Throwaway PostgreSQL server for tests: `scripts/pg.sh start` prints its SQLAlchemy URL, `stop` ends it.
# Uses Debian's server binaries (apt-get install postgresql); runs as user postgres when invoked as root.
set -euo pipefail
PGPORT="${MLAPERF_PG_PORT:-55432}"
PGDATA="${MLAPERF_PG_DIR:-/tmp/mlaperf-pg-$PGPORT}"
BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
if [[ -z "$BIN" ]]; then
  echo "pg.sh: no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)" >&2
  exit 1
fi
as_pg() { if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
USER_NAME="$( [[ "$(id -u)" == 0 ]] && echo postgres || id -un )"
URL="postgresql+psycopg://${USER_NAME}@127.0.0.1:${PGPORT}/mlaperf"
case "${1:-start}" in
  start)
    if [[ ! -f "$PGDATA/PG_VERSION" ]]; then
      mkdir -p "$PGDATA"
      [[ "$(id -u)" == 0 ]] && chown postgres: "$PGDATA"
      as_pg "$BIN/initdb" -D "$PGDATA" -A trust -U "$USER_NAME" >/dev/null
    fi
    if ! as_pg "$BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
      as_pg "$BIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w \
        -o "-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
    fi
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$PGPORT" -U "$USER_NAME" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='mlaperf'" | grep -q 1 ||
      as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U "$USER_NAME" mlaperf
    echo "$URL"
    ;;
  stop)
    as_pg "$BIN/pg_ctl" -D "$PGDATA" -m fast stop >/dev/null 2>&1 || true
    ;;
  url) echo "$URL" ;;
  *) echo "usage: scripts/pg.sh start|stop|url" >&2; exit 2 ;;
esac
