#!/usr/bin/env bash
# One replica against three, on this machine's PostgreSQL and NATS JetStream (issue 24):
# unary SendMessage to the echo agent over JSON-RPC, the same total connections spread
# evenly over the replicas (a load generator per replica, as a load balancer would).
#
#   bench/replicas.sh            # writes bench/results/<UTC date>-replicas.md
#
# Knobs: PG (postgres://postgres@127.0.0.1:5432/test), NATS (nats://127.0.0.1:4222),
# CONNS=48 SECS=5 ROUNDS=3, OUT=path.md.
#
# Four setups, each round in turn: one replica on PostgreSQL alone (no bus), one replica
# with --events (every event published to JetStream, tasks leased), the same with push off
# (with push on, a replica reads a leased task's push configs once per lease), three
# replicas with --events. On a 2-core machine three replicas and their load share the same two cores as
# one replica does, so the figure shows the cost of being a cluster, not its scaling. One
# schema serves every cell, so later cells run on a slightly larger tasks table.
set -euo pipefail
cd "$(dirname "$0")/.."
PG=${PG:-postgres://postgres@127.0.0.1:5432/test}
NATS=${NATS:-nats://127.0.0.1:4222}
CONNS=${CONNS:-48}
[ $((CONNS % 3)) -eq 0 ] || { echo "CONNS must split evenly over three replicas" >&2; exit 1; }
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench/results/$(date -u +%F)-replicas.md}

cargo build --release -q -p heddle -p heddle-bench-loadgen
R=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  psql "$PG" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
schema=heddle_bench_replicas_$$
trap cleanup EXIT
case $PG in *\?*) store="$PG&schema=$schema" ;; *) store="$PG?schema=$schema" ;; esac

start() { # port extra-args...
  local port=$1; shift
  "$R/heddle" serve --store "$store" --listen "127.0.0.1:$port" --grpc-listen 127.0.0.1:0 \
    --rate-limit 0 --admin-token-file "$work/admin-token" "$@" >"$work/$port.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "replica on $port did not start" >&2; cat "$work/$port.log" >&2; exit 1
}
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}

# One cell: SECS of load on each of the given ports at once; prints "rps p50 p99 errors"
# (requests/s summed, the worst replica's p50 and p99 in µs, errors summed).
load() {
  local n=$# per=$((CONNS / $#)) i=0 loads=()
  for port in "$@"; do
    "$R/heddle-bench-loadgen" "http://127.0.0.1:$port/api/v1/agents/echo/a2a" "$per" "$SECS" \
      >"$work/load-$i.json" &
    loads+=($!)
    i=$((i + 1))
  done
  for j in "${loads[@]}"; do wait "$j"; done
  python3 - "$work" "$n" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
rows = [json.load(open(f"{work}/load-{i}.json")) for i in range(n)]
print(int(sum(r["rps"] for r in rows)), max(r["p50_us"] for r in rows),
      max(r["p99_us"] for r in rows), sum(r["errors"] for r in rows))
PY
}

declare -A results
for round in $(seq "$ROUNDS"); do
  start 19501
  results[alone]+="$(load 19501);"
  stop_all
  start 19501 --events "$NATS"
  results[one]+="$(load 19501);"
  stop_all
  start 19501 --events "$NATS" --no-push
  results[nopush]+="$(load 19501);"
  stop_all
  start 19501 --events "$NATS"
  start 19502 --events "$NATS"
  start 19503 --events "$NATS"
  results[three]+="$(load 19501 19502 19503);"
  stop_all
done

python3 - "$OUT" "$CONNS" "$SECS" "$ROUNDS" "${results[alone]}" "${results[one]}" \
  "${results[nopush]}" "${results[three]}" <<'PY'
import statistics, sys, datetime
out, conns, secs, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
names = ["one replica, no bus", "one replica, --events",
         "one replica, --events --no-push", "three replicas, --events"]
lines = [f"# One replica against three ({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC)", "",
         f"`bench/replicas.sh`: unary SendMessage (echo, JSON-RPC) with {conns} connections in all,",
         f"spread evenly over the replicas, {secs} s a cell, {rounds} rounds, medians. PostgreSQL store and",
         "NATS JetStream on the same 2-core machine as the replicas and the load.", "",
         "| setup | requests/s | p50 µs | p99 µs | errors |", "|---|---:|---:|---:|---:|"]
for name, raw in zip(names, sys.argv[5:9]):
    cells = [list(map(int, c.split())) for c in raw.split(";") if c.strip()]
    med = [int(statistics.median(c[i] for c in cells)) for i in range(4)]
    lines.append(f"| {name} | {med[0]} | {med[1]} | {med[2]} | {med[3]} |")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
