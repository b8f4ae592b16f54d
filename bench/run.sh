#!/usr/bin/env bash
# Heddle's benchmark suite, in one run: Heddle (release), the official Python SDK (a2a-sdk, uvicorn,
# one worker), the official JS SDK (@a2a-js/sdk, express), the official Rust SDK (a2a-lf +
# a2a-server-lf, bench/other-rust), the ra2a crate from crates.io (bench/other-rust-ra2a) and the
# bare hyper + serde_json floor and the lean floor, typed serde in and out (bench/floor), side by side.
#
#   bench/run.sh
#
# Knobs (environment):
#   ROUNDS=3 SECS=3        interleaved rounds, seconds per cell (plus a 1 s warm-up); medians reported
#   SCENARIOS="unary rest grpc stream get"   which throughput scenarios run
#   SERVERS="floor lean heddle sqlite other ra2a python js"   which servers run them; also
#                          the durable stores (issue 24, not in the default list; bench/stores.sh
#                          runs them): pg (Heddle on PostgreSQL), pysqlite and pypg (the official
#                          Python SDK's DatabaseTaskStore), turulsqlite and turulpg (turul-a2a,
#                          bench/other-rust-turul)
#   PG=postgres://postgres@127.0.0.1:5432/test   the PostgreSQL the pg servers use (a URL
#                          without a query: pypg passes it to asyncpg), each in its own schema
#                          or tables, dropped at the end with psql
#   CONNS="1 16 64"        connections for unary JSON-RPC (REST, gRPC and GetTask use 16 and 64)
#   STREAMS=64             concurrent SSE streams in the streaming scenario
#   MILLION=1              the 1M-send memory run (0 skips it)
#   IDLE_STREAMS=10000     idle SSE streams held open for the memory figure (0 skips it)
#   SERVER_CPU=0 LOAD_CPU=1   the core every server is pinned to, and the load generator's
#   NOTE="..."             a line added to the results (e.g. that the machine was loaded)
#   OUT=path.md            where the report goes, relative to the repository root (default
#                          bench/results/<UTC date>-suite.md)
#   CARGO_TARGET_DIR       where the main workspace's binaries are built (default target/); the
#                          other-rust workspaces always build into their own target/
#
# Every server runs pinned to SERVER_CPU, the load generator (bench/loadgen) to LOAD_CPU. Each
# scenario runs every server in turn, ROUNDS times over, and the table reports medians, because a
# shared VM is noisy. Not every server has every binding: REST is Heddle, other, python and js
# (ra2a 0.10.1's REST router panics while building its routes); gRPC is Heddle, python and js,
# against a gRPC floor (bare hyper HTTP/2 + prost, bench/floor/src/grpc.rs).
# ra2a's JSON-RPC takes the v1.0 payloads under the v0.3 method names (message/send,
# message/stream, tasks/get), so it gets its own body files with those names.
# Writes the report (OUT) and prints it. About 13 minutes with the defaults on a
# 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
SCENARIOS=${SCENARIOS:-unary rest grpc stream get}
SERVERS=${SERVERS:-floor lean heddle sqlite other ra2a python js}
CONNS=${CONNS:-1 16 64}
STREAMS=${STREAMS:-64}
MILLION=${MILLION:-1}
IDLE_STREAMS=${IDLE_STREAMS:-10000}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
NOTE=${NOTE:-}

has() { [[ " $SERVERS " == *" $1 "* ]]; }
# Each held stream is a socket on both sides.
ulimit -n "$(ulimit -Hn)"
if [ "$IDLE_STREAMS" -gt 0 ] && [ "$(ulimit -n)" -lt $((IDLE_STREAMS + 1000)) ]; then
  echo "ulimit -n is $(ulimit -n): too low for IDLE_STREAMS=$IDLE_STREAMS" >&2
  exit 1
fi

echo "building (release)..." >&2
# Heddle itself only when a Heddle server or memory run needs it.
if has heddle || has sqlite || has pg || [ "$MILLION" = 1 ] || [ "$IDLE_STREAMS" -gt 0 ]; then
  cargo build --release -q -p heddle -p heddle-bench-floor -p heddle-bench-loadgen
else
  cargo build --release -q -p heddle-bench-floor -p heddle-bench-loadgen
fi
if has other; then
  env -u CARGO_TARGET_DIR cargo build --release -q --manifest-path bench/other-rust/Cargo.toml
fi
if has ra2a; then
  env -u CARGO_TARGET_DIR cargo build --release -q --manifest-path bench/other-rust-ra2a/Cargo.toml
fi
if has turulsqlite || has turulpg; then
  # turul-a2a-proto's build script runs protoc (Debian: apt-get install protobuf-compiler).
  command -v protoc >/dev/null || [ -n "${PROTOC:-}" ] || { echo "turul-a2a needs protoc" >&2; exit 1; }
  env -u CARGO_TARGET_DIR cargo build --release -q --manifest-path bench/other-rust-turul/Cargo.toml
fi
if has python || has js || has pysqlite || has pypg; then
  tests/interop/setup.sh >&2
fi
if has pysqlite || has pypg; then
  tests/interop/.venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r tests/interop/python/bench-store-requirements.txt >&2
fi
PG=${PG:-postgres://postgres@127.0.0.1:5432/test}
if has pg || has pypg || has turulpg; then
  command -v psql >/dev/null || { echo "the PostgreSQL servers need psql (to drop their tables)" >&2; exit 1; }
fi
# Heddle and turul-a2a each in a schema of their own (the `schema` URL parameter both take
# here); the Python SDK's store in its own tables (bench_py_*), which it recreates.
pg_schema=heddle_bench_$$
with_schema() { case $PG in *\?*) echo "$PG&schema=$1" ;; *) echo "$PG?schema=$1" ;; esac; }
R=${CARGO_TARGET_DIR:-target}/release
LOADGEN=$R/heddle-bench-loadgen
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if has pg || has turulpg; then
    for schema in "$pg_schema" "${pg_schema}_turul"; do
      psql "$PG" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
    done
  fi
  if has pypg; then
    psql "$PG" -qc "DROP TABLE IF EXISTS bench_py_echo_tasks, bench_py_stream_tasks" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

start() { # name port cmd...
  local name=$1 port=$2; shift 2
  taskset -c "$SERVER_CPU" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 300); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "$name did not start" >&2; cat "$work/$name.log" >&2; exit 1
}
stop() { # name
  local pid_var="pid_$1"
  kill "${!pid_var}" 2>/dev/null || true
  wait "${!pid_var}" 2>/dev/null || true
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system, in clock ticks
idle_rss=()

has floor && start floor 19090 $R/heddle-bench-floor 127.0.0.1:19090 127.0.0.1:19390
# The lean floor: the same exchange with typed serde structs in and out.
has lean && start lean 19089 $R/heddle-bench-floor 127.0.0.1:19089 --lean
# The load generator is one anonymous caller: the per-caller rate limit is off.
has heddle && start heddle 19191 $R/heddle serve --store memory --listen 127.0.0.1:19191 \
  --grpc-listen 127.0.0.1:19291 --writer-stream-pause-ms 0 --rate-limit 0
has sqlite && start sqlite 19192 $R/heddle serve --store "sqlite:$work/bench.db" \
  --listen 127.0.0.1:19192 --grpc-listen 127.0.0.1:0 --writer-stream-pause-ms 0 --rate-limit 0
has other && start other 19193 bench/other-rust/target/release/heddle-bench-other-rust 127.0.0.1:19193
has ra2a && start ra2a 19198 bench/other-rust-ra2a/target/release/heddle-bench-ra2a 127.0.0.1:19198
has python && start python 19194 tests/interop/.venv/bin/python \
  tests/interop/servers/python_bench_server.py 19194 19294
has js && start js 19195 node tests/interop/servers/js_bench_server.mjs 19195 19295
has pg && start pg 19200 $R/heddle serve --store "$(with_schema "$pg_schema")" \
  --listen 127.0.0.1:19200 --grpc-listen 127.0.0.1:0 --writer-stream-pause-ms 0 --rate-limit 0
has pysqlite && start pysqlite 19201 tests/interop/.venv/bin/python \
  tests/interop/servers/python_bench_server.py 19201 19301 "sqlite+aiosqlite:///$work/py.db"
has pypg && start pypg 19202 tests/interop/.venv/bin/python \
  tests/interop/servers/python_bench_server.py 19202 19302 "postgresql+asyncpg://${PG#*://}"
has turulsqlite && start turulsqlite 19203 bench/other-rust-turul/target/release/heddle-bench-turul \
  127.0.0.1:19203 "sqlite:$work/turul.db"
has turulpg && start turulpg 19204 bench/other-rust-turul/target/release/heddle-bench-turul \
  127.0.0.1:19204 "$(with_schema "${pg_schema}_turul")"
sleep 1
for s in $SERVERS; do
  pid_var="pid_$s"
  idle_rss+=("\"$s\":$(rss_kb "${!pid_var}")")
done

# The bodies: SendMessage (the loadgen's default), its REST form, SendStreamingMessage, GetTask.
text="Summarize the quarterly report in three short paragraphs."
message() { # messageId -> SendMessage params
  echo "{\"message\":{\"messageId\":\"$1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"$text\"}]}}"
}
method() { # server v1.0-method -> the method name that server's JSON-RPC answers to
  # ra2a takes the v1.0 payloads, but only under the v0.3 method names.
  case "$1/$2" in
    ra2a/SendMessage) echo message/send ;;
    ra2a/SendStreamingMessage) echo message/stream ;;
    ra2a/GetTask) echo tasks/get ;;
    *) echo "$2" ;;
  esac
}
rpc() { # server v1.0-method params -> a JSON-RPC request
  echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$(method "$1" "$2")\",\"params\":$3}"
}
message bench-0001 >"$work/rest.json"
# The loadgen's default bodies under ra2a's method names.
rpc ra2a SendMessage "$(message bench-0001)" >"$work/send-ra2a.json"
rpc ra2a SendStreamingMessage "$(message bench-0001)" >"$work/stream-ra2a.json"
send() { # server url -> the task id of a SendMessage answer
  curl -sf -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -d "$(rpc "$1" SendMessage "$(message bench-get)")" "$2" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["task"]["id"])'
}

# cell "scenario/server" -> "URL [BODY_FILE]"; the server's pid is charged for CPU.
declare -A cell=(
  [unary/floor]="http://127.0.0.1:19090/"
  [unary/lean]="http://127.0.0.1:19089/"
  [unary/heddle]="http://127.0.0.1:19191/api/v1/agents/echo/a2a"
  [unary/sqlite]="http://127.0.0.1:19192/api/v1/agents/echo/a2a"
  [unary/other]="http://127.0.0.1:19193/echo"
  [unary/ra2a]="http://127.0.0.1:19198/echo $work/send-ra2a.json"
  [unary/python]="http://127.0.0.1:19194/echo/jsonrpc"
  [unary/js]="http://127.0.0.1:19195/echo/jsonrpc"
  [unary/pg]="http://127.0.0.1:19200/api/v1/agents/echo/a2a"
  [unary/pysqlite]="http://127.0.0.1:19201/echo/jsonrpc"
  [unary/pypg]="http://127.0.0.1:19202/echo/jsonrpc"
  [unary/turulsqlite]="http://127.0.0.1:19203/echo"
  [unary/turulpg]="http://127.0.0.1:19204/echo"
  [rest/heddle]="http://127.0.0.1:19191/api/v1/agents/echo/rest/message:send $work/rest.json"
  [rest/other]="http://127.0.0.1:19193/echo/rest/message:send $work/rest.json"
  [rest/python]="http://127.0.0.1:19194/echo/rest/message:send $work/rest.json"
  [rest/js]="http://127.0.0.1:19195/echo/rest/message:send $work/rest.json"
  [grpc/floor]="grpc://127.0.0.1:19390/echo"
  [grpc/heddle]="grpc://127.0.0.1:19291/echo"
  [grpc/python]="grpc://127.0.0.1:19294/echo"
  [grpc/js]="grpc://127.0.0.1:19295/echo"
  [stream/floor]="sse://127.0.0.1:19090/stream"
  [stream/heddle]="sse://127.0.0.1:19191/api/v1/agents/writer-stream/a2a"
  [stream/sqlite]="sse://127.0.0.1:19192/api/v1/agents/writer-stream/a2a"
  [stream/other]="sse://127.0.0.1:19193/stream"
  [stream/ra2a]="sse://127.0.0.1:19198/stream $work/stream-ra2a.json"
  [stream/python]="sse://127.0.0.1:19194/stream/jsonrpc"
  [stream/js]="sse://127.0.0.1:19195/stream/jsonrpc"
  [stream/pg]="sse://127.0.0.1:19200/api/v1/agents/writer-stream/a2a"
  [stream/pysqlite]="sse://127.0.0.1:19201/stream/jsonrpc"
  [stream/pypg]="sse://127.0.0.1:19202/stream/jsonrpc"
  [stream/turulsqlite]="sse://127.0.0.1:19203/stream"
  [stream/turulpg]="sse://127.0.0.1:19204/stream"
)
if [[ " $SCENARIOS " == *" get "* ]]; then
  declare -A get_url=(
    [floor]="http://127.0.0.1:19090/"
    [lean]="http://127.0.0.1:19089/"
    [heddle]="http://127.0.0.1:19191/api/v1/agents/echo/a2a"
    [sqlite]="http://127.0.0.1:19192/api/v1/agents/echo/a2a"
    [other]="http://127.0.0.1:19193/echo"
    [ra2a]="http://127.0.0.1:19198/echo"
    [python]="http://127.0.0.1:19194/echo/jsonrpc"
    [js]="http://127.0.0.1:19195/echo/jsonrpc"
    [pg]="http://127.0.0.1:19200/api/v1/agents/echo/a2a"
    [pysqlite]="http://127.0.0.1:19201/echo/jsonrpc"
    [pypg]="http://127.0.0.1:19202/echo/jsonrpc"
    [turulsqlite]="http://127.0.0.1:19203/echo"
    [turulpg]="http://127.0.0.1:19204/echo"
  )
  for s in $SERVERS; do
    cell[get/$s]="${get_url[$s]} $work/get-$s.json"
  done
fi
conns_for() {
  case $1 in
    unary) echo "$CONNS" ;;
    stream) echo "$STREAMS" ;;
    *) echo "16 64" ;;
  esac
}

for round in $(seq "$ROUNDS"); do
  for scenario in $SCENARIOS; do
    for c in $(conns_for "$scenario"); do
      for s in $SERVERS; do
        [ -n "${cell[$scenario/$s]:-}" ] || continue
        read -r target body <<<"${cell[$scenario/$s]}"
        # GetTask reads a task made just now: one made at start-up is long
        # evicted from the bounded memory store by the sends in between.
        if [ "$scenario" = get ]; then
          id=$(send "$s" "${get_url[$s]}")
          rpc "$s" GetTask "{\"id\":\"$id\"}" >"$work/get-$s.json"
        fi
        pid_var="pid_$s"
        before=$(cpu_ticks "${!pid_var}")
        line=$(taskset -c "$LOAD_CPU" $LOADGEN "$target" "$c" "$SECS" $body)
        after=$(cpu_ticks "${!pid_var}")
        echo "{\"scenario\":\"$scenario\",\"server\":\"$s\",\"round\":$round,\"cpu_ticks\":$((after - before)),\"result\":$line}" |
          tee -a "$work/runs.jsonl" >&2
      done
    done
  done
done
final_rss=()
for s in $SERVERS; do
  pid_var="pid_$s"
  final_rss+=("\"$s\":$(rss_kb "${!pid_var}")")
  stop "$s"
done

# Memory: Heddle alone, a fresh process each.
mem="{}"
if [ "$MILLION" = 1 ]; then
  start mem1m 19196 $R/heddle serve --store memory --listen 127.0.0.1:19196 --grpc-listen 127.0.0.1:0 \
    --rate-limit 0
  idle=$(rss_kb "$pid_mem1m")
  taskset -c "$LOAD_CPU" $LOADGEN http://127.0.0.1:19196/api/v1/agents/echo/a2a 64 100000r >/dev/null
  at100k=$(rss_kb "$pid_mem1m")
  taskset -c "$LOAD_CPU" $LOADGEN http://127.0.0.1:19196/api/v1/agents/echo/a2a 64 900000r >/dev/null
  at1m=$(rss_kb "$pid_mem1m")
  stop mem1m
  mem=$(python3 -c 'import json,sys; print(json.dumps({"idle_kb": int(sys.argv[1]), "at100k_kb": int(sys.argv[2]), "at1m_kb": int(sys.argv[3])}))' "$idle" "$at100k" "$at1m")
fi
streams="{}"
streams_floor="{}"
# held NAME URL: holds IDLE_STREAMS idle streams open on the server started as NAME; prints its
# RSS before and with them, and the load generator's counts, as one JSON object.
held() {
  local name=$1 url=$2 pid_var="pid_$1" idle held_rss hold_pid
  idle=$(rss_kb "${!pid_var}")
  taskset -c "$LOAD_CPU" $LOADGEN "$url" "$IDLE_STREAMS" 5 >"$work/$name.out" &
  hold_pid=$!
  until [ -s "$work/$name.out" ]; do sleep 0.5; done
  sleep 2
  held_rss=$(rss_kb "${!pid_var}")
  wait "$hold_pid"
  python3 -c 'import json,sys; o=json.loads(sys.argv[1]); h=json.loads(sys.argv[2]); print(json.dumps({"idle_kb": int(sys.argv[3]), "held_kb": int(sys.argv[4]), **o, **h}))' \
    "$(sed -n 1p "$work/$name.out")" "$(sed -n 2p "$work/$name.out")" "$idle" "$held_rss"
}
if [ "$IDLE_STREAMS" -gt 0 ]; then
  # writer-stream with a ten-minute pause: each stream gets its task and WORKING, then waits.
  start held 19197 $R/heddle serve --store memory --listen 127.0.0.1:19197 --grpc-listen 127.0.0.1:0 \
    --max-streams $((IDLE_STREAMS + 100)) --max-streams-per-caller $((IDLE_STREAMS + 100)) \
    --max-connections-per-ip $((IDLE_STREAMS + 100)) --max-running-tasks-per-caller $((IDLE_STREAMS + 100)) \
    --rate-limit 0 --writer-stream-pause-ms 600000
  streams=$(held held hold://127.0.0.1:19197/api/v1/agents/writer-stream/a2a)
  stop held
  # The same streams held by the floor (POST /hold: the first two events, then silence), for
  # what bare hyper itself costs per idle connection.
  start held_floor 19199 $R/heddle-bench-floor 127.0.0.1:19199
  streams_floor=$(held held_floor hold://127.0.0.1:19199/hold)
  stop held_floor
fi

versions=$(
  python3 - <<'PY'
import json, re, subprocess
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
v = {"rustc": run("rustc", "--version"), "commit": run("git", "rev-parse", "--short", "HEAD")}
v["python"] = run("tests/interop/.venv/bin/python", "--version")
v["a2a-sdk"] = run("tests/interop/.venv/bin/python", "-c", "import importlib.metadata as m; print(m.version('a2a-sdk'))")
v["node"] = run("node", "--version")
try:
    v["@a2a-js/sdk"] = json.load(open("tests/interop/node_modules/@a2a-js/sdk/package.json"))["version"]
except OSError:
    v["@a2a-js/sdk"] = "?"
try:
    lock = open("bench/other-rust/Cargo.lock").read()
    for name in ("a2a-lf", "a2a-server-lf"):
        m = re.search(r'name = "%s"\nversion = "([^"]+)"' % name, lock)
        v[name] = m.group(1) if m else "?"
except OSError:
    pass
for crate, lock in (("ra2a", "bench/other-rust-ra2a/Cargo.lock"), ("turul-a2a", "bench/other-rust-turul/Cargo.lock")):
    try:
        m = re.search(r'name = "%s"\nversion = "([^"]+)"' % crate, open(lock).read())
        v[crate] = m.group(1) if m else "?"
    except OSError:
        pass
print(json.dumps(v))
PY
)

out=${OUT:-bench/results/$(date -u +%Y-%m-%d)-suite.md}
mkdir -p "$(dirname "$out")"
python3 bench/report.py "$work/runs.jsonl" \
  "{\"rounds\":$ROUNDS,\"secs\":$SECS,\"streams\":$STREAMS,\"note\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$NOTE"),
    \"idle_rss_kb\":{$(IFS=,; echo "${idle_rss[*]}")},\"final_rss_kb\":{$(IFS=,; echo "${final_rss[*]}")},
    \"million\":$mem,\"held\":$streams,\"held_floor\":$streams_floor,\"versions\":$versions}" >"$out"
cat "$out"
