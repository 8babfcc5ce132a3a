#!/usr/bin/env bash
# A throwaway PostgreSQL server for the banks tests, from Debian's `postgresql` package.
#
#   scripts/postgres.sh start [--watch PID]   installs the package if it is missing (apt, as root), creates a
#                                             cluster in a temporary directory, starts it on 127.0.0.1 and a
#                                             free port, and prints MEMGYM_TEST_POSTGRES_URL=… and
#                                             MEMGYM_TEST_POSTGRES_DIR=… (eval-able). With --watch, the
#                                             server stops and its directory is removed when PID exits.
#   scripts/postgres.sh stop DIR              stops the server of DIR and removes DIR.
#
# PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user the package creates.
# Everything else (fsync, synchronous_commit) keeps PostgreSQL's durable defaults.
set -euo pipefail

bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ]; then echo "$d"; return; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  return 1
}

as_owner() {
  if [ "$(id -u)" != 0 ]; then "$@"; return; fi
  # runuser lives in /usr/sbin, which a minimal PATH may lack; su is the fallback.
  local ru
  ru=$(command -v runuser || ls /usr/sbin/runuser /sbin/runuser 2>/dev/null | head -1 || true)
  if [ -n "$ru" ]; then "$ru" -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

start() {
  local watch=""
  if [ "${1:-}" = --watch ]; then watch=$2; fi
  local bin
  if ! bin=$(bindir); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "== installing Debian's postgresql" >&2
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
      bin=$(bindir)
    else
      echo "PostgreSQL's initdb was not found: install Debian's postgresql package (scripts/test does, as root)" >&2
      exit 1
    fi
  fi
  local dir port
  dir=$(mktemp -d -t memgym-pg.XXXXXX)
  chmod 755 "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner "$bin/initdb" -D "$dir/data" -U memgym --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  if [ -n "$watch" ]; then
    # Stops the server when the process that asked for it is gone (a test binary has no teardown hook).
    nohup bash -c "while kill -0 $watch 2>/dev/null; do sleep 1; done; \"$0\" stop \"$dir\"" >/dev/null 2>&1 &
  fi
  echo "MEMGYM_TEST_POSTGRES_URL=postgres://memgym@127.0.0.1:$port/postgres"
  echo "MEMGYM_TEST_POSTGRES_DIR=$dir"
}

stop() {
  local dir=$1 bin
  bin=$(bindir)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop "$2" ;;
  *) echo "usage: $0 start [--watch PID] | stop DIR" >&2; exit 2 ;;
esac
