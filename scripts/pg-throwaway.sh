# Source this file: starts a throwaway PostgreSQL on a free loopback port, exports
# ULTRAPLAN_TEST_POSTGRES_URL, and stops and deletes the cluster when the shell exits.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg_bin" ]; then
  echo "PostgreSQL server binaries not found; install the 'postgresql' package" >&2
  return 1 2>/dev/null || exit 1
fi
pg_data=$(mktemp -d /tmp/ultraplan-pg.XXXXXX)
pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pg_as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$pg_data"
pg_as "$pg_bin/initdb" -D "$pg_data/db" -A trust -U postgres --no-sync >/dev/null
pg_as "$pg_bin/pg_ctl" -D "$pg_data/db" -l "$pg_data/log" -w \
  -o "-p $pg_port -k $pg_data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >/dev/null
export ULTRAPLAN_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
pg_stop() { pg_as "$pg_bin/pg_ctl" -D "$pg_data/db" -m immediate stop >/dev/null 2>&1; rm -rf "$pg_data"; }
trap pg_stop EXIT
echo "throwaway PostgreSQL on port $pg_port" >&2
