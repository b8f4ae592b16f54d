#!/usr/bin/env bash
# The hub's cost of fronting a remote agent (issue 21): an echo agent served by one `heddle serve`
# (the upstream), registered as a `remote` agent in a second `heddle serve` (the hub), driven
# through the hub and directly, in one run.
#
#   bench/proxy.sh
#
# Reported: the hub's CPU time per proxied request (its own process only: receiving the call,
# keeping the hub task, calling upstream, relaying the answer) over the upstream's CPU time per
# direct request, both read from /proc/PID/stat around a fixed number of requests. Target: at
# most 1.5x. Also the throughput and latency of each path, as the load generator saw them.
#
# Knobs: REQUESTS=20000 CONNS=16 ROUNDS=3, SERVER_CPU=0 (both servers) LOAD_CPU=1,
# OUT=path.md (default bench/results/<UTC date>-proxy.md).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-20000}
CONNS=${CONNS:-16}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
OUT=${OUT:-bench/results/$(date -u +%F)-proxy.md}
TARGET=${CARGO_TARGET_DIR:-target}

cargo build --release -q -p heddle -p heddle-bench-loadgen
heddle="$TARGET/release/heddle"
load="$TARGET/release/heddle-bench-loadgen"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up_port=$(free_port)
hub_port=$(free_port)

serve() { # name port [config]
  local name=$1 port=$2
  shift 2
  taskset -c "$SERVER_CPU" "$heddle" serve --store memory --listen "127.0.0.1:$port" \
    --grpc-listen 127.0.0.1:0 --rate-limit 0 --admin-token-file "$work/$name-token" "$@" \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/api/v1/agents" >/dev/null && return 0
    sleep 0.1
  done
  echo "$name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}

serve upstream "$up_port"
up_pid=${pids[-1]}
cat >"$work/hub.toml" <<EOF
[[agents]]
id = "echo-remote"
kind = "remote"
card_url = "http://127.0.0.1:$up_port/api/v1/agents/echo"
allow_http = true
EOF
serve hub "$hub_port" --config "$work/hub.toml" --default-agent echo-remote
hub_pid=${pids[-1]}

# utime + stime of a process, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick=$(getconf CLK_TCK)

direct="http://127.0.0.1:$up_port/api/v1/agents/echo/a2a"
proxied="http://127.0.0.1:$hub_port/api/v1/agents/echo-remote/a2a"
# The proxied path must really complete tasks (a failed task is a 200 too).
answer=$(curl -s -H 'content-type: application/json' -H 'a2a-version: 1.0' -d \
  '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
  "$proxied")
if [[ "$answer" != *TASK_STATE_COMPLETED* ]]; then
  echo "the proxied echo did not complete: $answer" >&2
  exit 1
fi
# Warm both paths (connections, allocator, the hub's client pool).
taskset -c "$LOAD_CPU" "$load" "$direct" "$CONNS" 2000r >/dev/null
taskset -c "$LOAD_CPU" "$load" "$proxied" "$CONNS" 2000r >/dev/null

rows=()
ratios=()
for round in $(seq "$ROUNDS"); do
  u0=$(cpu "$up_pid")
  d=$(taskset -c "$LOAD_CPU" "$load" "$direct" "$CONNS" "${REQUESTS}r")
  u1=$(cpu "$up_pid")
  h0=$(cpu "$hub_pid")
  p=$(taskset -c "$LOAD_CPU" "$load" "$proxied" "$CONNS" "${REQUESTS}r")
  h1=$(cpu "$hub_pid")
  ratio=$(python3 - "$u0" "$u1" "$h0" "$h1" "$REQUESTS" "$tick" "$d" "$p" <<'PY'
import json, sys
u0, u1, h0, h1, n, tick = (float(x) for x in sys.argv[1:7])
d, p = json.loads(sys.argv[7]), json.loads(sys.argv[8])
direct_us = (u1 - u0) / tick / n * 1e6
hub_us = (h1 - h0) / tick / n * 1e6
if d.get("errors") or p.get("errors"):
    sys.exit(f"errors: direct {d.get('errors')}, proxied {p.get('errors')}")
print(f"{hub_us / direct_us:.2f} {direct_us:.1f} {hub_us:.1f} {d['rps']:.0f} {p['rps']:.0f} {d['p50_us']} {p['p50_us']}")
PY
)
  read -r r du hu drps prps dp50 pp50 <<<"$ratio"
  ratios+=("$r")
  rows+=("| $round | $du | $hu | **$r** | $drps | $prps | $dp50 | $pp50 |")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')

{
  echo "# Proxied echo through the hub against a direct call ($(date -u '+%F %H:%M') UTC)"
  echo
  echo "\`bench/proxy.sh\` at $(git rev-parse --short HEAD): REQUESTS=$REQUESTS CONNS=$CONNS ROUNDS=$ROUNDS;"
  echo "both servers \`heddle serve --store memory\` pinned to core $SERVER_CPU, the load generator to core $LOAD_CPU;"
  echo "$(nproc) cores. CPU is each process's own utime+stime over the requests (/proc/PID/stat)."
  echo
  echo "| round | upstream CPU µs per direct request | hub CPU µs per proxied request | ratio (target ≤ 1.5) | direct req/s | proxied req/s | direct p50 µs | proxied p50 µs |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Median ratio: **$median**."
} | tee "$OUT"
