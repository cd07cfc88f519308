#!/usr/bin/env bash
# A throwaway PostgreSQL server for the gradebook (tests, a trial run); prints its SQLAlchemy URL.
#
#   scripts/setup-postgres.sh [BASE_DIR]        start a server with its data in BASE_DIR (default: a new
#                                               temp dir) on a free port of 127.0.0.1, create the database
#                                               `gradebook`, print postgresql+psycopg://postgres@127.0.0.1:PORT/gradebook
#   scripts/setup-postgres.sh --stop BASE_DIR   stop that server and delete BASE_DIR
#
# Installs Debian's `postgresql` package with apt-get when no server binaries are found (needs root).
# As root, the server runs as the `postgres` user (initdb refuses root). Authentication is `trust`
# on 127.0.0.1 only: this is for tests, not for a course's real gradebook.
# Progress goes to stderr; stdout is only the URL.
set -euo pipefail

find_pgbin() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return 0
        fi
    done
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    return 1
}

as_owner() {  # run a server binary as the user that owns the cluster
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

if [ "${1:-}" = "--stop" ]; then
    base="${2:?usage: setup-postgres.sh --stop BASE_DIR}"
    pgbin="$(cat "$base/PGBIN" 2>/dev/null || find_pgbin)"
    if [ -f "$base/data/postmaster.pid" ]; then
        as_owner "$pgbin/pg_ctl" -D "$base/data" -m immediate -w stop >&2 || true
    fi
    rm -rf "$base"
    exit 0
fi

if ! pgbin="$(find_pgbin)"; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-postgres: PostgreSQL is not installed and installing it needs root (apt-get install postgresql)" >&2
        exit 1
    fi
    echo "setup-postgres: installing postgresql with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    pgbin="$(find_pgbin)"
fi

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
fi

base="${1:-}"
if [ -z "$base" ]; then
    base="$(mktemp -d "${TMPDIR:-/tmp}/gradebook-pg.XXXXXX")"
fi
mkdir -p "$base"
chmod 700 "$base"
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$base"
    # the server user must be able to reach BASE_DIR
    d="$(dirname "$(readlink -f "$base")")"
    while [ "$d" != / ]; do
        if ! runuser -u postgres -- test -x "$d"; then
            echo "setup-postgres: the postgres user cannot enter $d; choose a BASE_DIR under /tmp" >&2
            exit 1
        fi
        d="$(dirname "$d")"
    done
fi
echo "$pgbin" > "$base/PGBIN"

port="$(python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
)"

as_owner "$pgbin/initdb" -D "$base/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$base/initdb.log" 2>&1 \
    || { cat "$base/initdb.log" >&2; exit 1; }
as_owner "$pgbin/pg_ctl" -D "$base/data" -l "$base/data/server.log" -w -t 60 \
    -o "-p $port -k $base -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >&2 || { cat "$base/data/server.log" >&2; exit 1; }
as_owner "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres gradebook >&2

url="postgresql+psycopg://postgres@127.0.0.1:$port/gradebook"
echo "$url" > "$base/URL"
echo "setup-postgres: server running in $base (stop with: $0 --stop $base)" >&2
echo "$url"
