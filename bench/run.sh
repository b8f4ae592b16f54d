#!/usr/bin/env bash
# Heddle's SendMessage benchmark (JSON-RPC, REST, gRPC), side by side with the bare-hyper floor, in one run.
#
#   bench/run.sh            # ROUNDS=3 SECS=5 by default; MILLION=0 skips the 1M-request memory run;
#                           # CELLS="floor memory" runs only those cells
#
# Every server is pinned to one core (SERVER_CPU, default 0), the load
# generator to another (LOAD_CPU, default 1). Scenarios run interleaved,
# ROUNDS times, and the table reports medians, because a shared VM is noisy.
# Writes bench/results/<date>-send.md and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
MILLION=${MILLION:-1}

cargo build --release -q -p heddle -p heddle-bench-floor -p heddle-bench-loadgen
R=target/release
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

start() { # name port cmd...
  local name=$1 port=$2; shift 2
  taskset -c "$SERVER_CPU" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "$name did not start" >&2; cat "$work/$name.log" >&2; exit 1
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system, in clock ticks

start floor 19090 $R/heddle-bench-floor 127.0.0.1:19090
start memory 19191 $R/heddle serve --store memory --listen 127.0.0.1:19191 --grpc-listen 127.0.0.1:19291
start sqlite 19192 $R/heddle serve --store "sqlite:$work/bench.db" --listen 127.0.0.1:19192 --grpc-listen 127.0.0.1:0

# The REST body is the JSON-RPC request's params: the same message.
echo '{"message":{"messageId":"bench-0001","role":"ROLE_USER","parts":[{"text":"Summarize the quarterly report in three short paragraphs."}]}}' >"$work/rest.json"

# cell name -> "server URL [BODY_FILE]"; the server's pid is charged for CPU.
declare -A cell=(
  [floor]="floor http://127.0.0.1:19090/"
  [memory]="memory http://127.0.0.1:19191/api/v1/agents/echo/a2a"
  [rest]="memory http://127.0.0.1:19191/api/v1/agents/echo/rest/message:send $work/rest.json"
  [grpc]="memory grpc://127.0.0.1:19291/echo"
  [sqlite]="sqlite http://127.0.0.1:19192/api/v1/agents/echo/a2a"
)
CELLS=${CELLS:-floor memory rest grpc sqlite}
for round in $(seq "$ROUNDS"); do
  for c in 16 64; do
    for s in $CELLS; do
      read -r server target body <<<"${cell[$s]}"
      pid_var="pid_$server"
      before=$(cpu_ticks "${!pid_var}")
      line=$(taskset -c "$LOAD_CPU" $R/heddle-bench-loadgen "$target" "$c" "$SECS" $body)
      after=$(cpu_ticks "${!pid_var}")
      echo "{\"server\":\"$s\",\"round\":$round,\"cpu_ticks\":$((after - before)),\"result\":$line}" | tee -a "$work/runs.jsonl" >&2
    done
  done
done

mem_lines=""
if [ "$MILLION" = 1 ]; then
  start mem1m 19193 $R/heddle serve --store memory --listen 127.0.0.1:19193 --grpc-listen 127.0.0.1:0
  idle=$(rss_kb "$pid_mem1m")
  taskset -c "$LOAD_CPU" $R/heddle-bench-loadgen http://127.0.0.1:19193/api/v1/agents/echo/a2a 64 100000r >/dev/null
  at100k=$(rss_kb "$pid_mem1m")
  taskset -c "$LOAD_CPU" $R/heddle-bench-loadgen http://127.0.0.1:19193/api/v1/agents/echo/a2a 64 900000r >/dev/null
  at1m=$(rss_kb "$pid_mem1m")
  mem_lines="{\"idle_kb\":$idle,\"at100k_kb\":$at100k,\"at1m_kb\":$at1m}"
fi

mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%d)-send.md"
python3 - "$work/runs.jsonl" "$mem_lines" "$ROUNDS" "$SECS" "$CELLS" >"$out" <<'PY'
import json, os, statistics, sys, subprocess, platform, datetime
runs = [json.loads(l) for l in open(sys.argv[1])]
mem = json.loads(sys.argv[2]) if sys.argv[2] else None
rounds, secs, cells = sys.argv[3], sys.argv[4], sys.argv[5].split()
def med(server, c, key):
    vals = [r["result"][key] for r in runs if r["server"] == server and r["result"]["connections"] == c]
    return statistics.median(vals) if vals else 0
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
def cpu_per_req(server, c):
    # Server CPU (user + system) per request, over the whole run including warm-up.
    vals = [r["cpu_ticks"] * tick_us / max(1, r["result"]["requests"] * (1 + 1 / r["result"]["seconds"]))
            for r in runs if r["server"] == server and r["result"]["connections"] == c]
    return statistics.median(vals) if vals else 0
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
print(f"# SendMessage benchmark, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
print(f"- commit {commit}, {rustc}, {platform.system()} {platform.release()}, {cpu}")
print(f"- each server pinned to one core, load generator on another; {rounds} interleaved rounds of {secs} s per cell; medians")
print("- request: SendMessage with one text part, `A2A-Version: 1.0`; Heddle's echo agent answers a COMPLETED task with the text as an artifact")
print("- JSON-RPC and REST: HTTP/1.1 keep-alive connections; gRPC: that many concurrent streams over one HTTP/2 connection (`H2_CONNS`)\n")
print("| server | connections | requests/s | × floor | p50 µs | p99 µs | p99 × floor | server CPU µs/request | CPU × floor |")
print("|---|---|---|---|---|---|---|---|---|")
names = {"floor": "bare hyper + serde_json (floor)", "memory": "heddle serve, JSON-RPC, memory store",
         "rest": "heddle serve, REST, memory store", "grpc": "heddle serve, gRPC, memory store",
         "sqlite": "heddle serve, JSON-RPC, SQLite store"}
for c in (16, 64):
    f_rps, f_p99, f_cpu = med("floor", c, "rps"), med("floor", c, "p99_us"), cpu_per_req("floor", c)
    for s in cells:
        rps, p50, p99, cpu = med(s, c, "rps"), med(s, c, "p50_us"), med(s, c, "p99_us"), cpu_per_req(s, c)
        print(f"| {names[s]} | {c} | {rps:,.0f} | {rps / f_rps:.2f} | {p50:,.0f} | {p99:,.0f} | {p99 / f_p99:.2f} | {cpu:.1f} | {cpu / f_cpu:.2f} |")
if "grpc" in cells and "memory" in cells:
    for c in (16, 64):
        m = med("memory", c, "rps")
        print(f"\nAt {c}: gRPC {med('grpc', c, 'rps') / m:.2f}× JSON-RPC" + (f", REST {med('rest', c, 'rps') / m:.2f}× JSON-RPC" if "rest" in cells else "") + " (memory store).")
if mem:
    growth = (mem["at1m_kb"] - mem["at100k_kb"]) / mem["at100k_kb"] * 100
    print(f"\nMemory, `heddle serve --store memory` (bounded: 10,000 finished tasks kept): idle {mem['idle_kb'] / 1024:.1f} MB, "
          f"after 100k sends {mem['at100k_kb'] / 1024:.1f} MB, after 1M sends {mem['at1m_kb'] / 1024:.1f} MB ({growth:+.1f}% from 100k to 1M).")
PY
cat "$out"
