# Sourced by scripts/test.sh: start a throwaway PostgreSQL cluster for the tests and export TELO_TEST_PG_URL.
# Under CI=true failure to start is fatal (PostgreSQL tests must run there); elsewhere the tests skip with a reason.
pg_start() {
  if [ -n "${TELO_TEST_PG_URL:-}" ]; then return 0; fi
  local bindir
  bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "postgres: no server binaries found; PostgreSQL tests will skip"; return 1
  fi
  local dir port runas=()
  dir="$(mktemp -d /tmp/telo-pg.XXXXXX)"
  port="${TELO_TEST_PG_PORT:-$((20000 + RANDOM % 20000))}"
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$dir"; runas=(runuser -u postgres --)
  fi
  "${runas[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 || {
    echo "postgres: initdb failed (see $dir/initdb.log)"; return 1; }
  "${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200" start >/dev/null || {
    echo "postgres: server failed to start (see $dir/server.log)"; return 1; }
  export TELO_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
  export TELO_TEST_PG_DIR="$dir"
  # Stop the throwaway server when the calling shell exits (globals: the trap runs after this function).
  _TELO_PG_STOP=("${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop)
  trap 'if [ -n "${_TELO_PG_STOP+x}" ]; then "${_TELO_PG_STOP[@]}" >/dev/null 2>&1 || true; rm -rf "$TELO_TEST_PG_DIR"; fi' EXIT
  echo "postgres: throwaway cluster on port $port ($dir)"
}
if ! pg_start; then
  if [ "${CI:-}" = "true" ]; then echo "postgres: required under CI=true" >&2; exit 1; fi
fi
