#!/usr/bin/env bash
# ITK interop: `heddle itk-agent` (H) with ITK-style agents built on the
# official Python SDK (P, itk/python_agent.py, a2a-sdk) and JS SDK (J,
# itk/js_agent.mjs, @a2a-js/sdk), and the same two as v0.3-only agents (P3,
# J3: --protocol 0.3). Each agent runs on its own free ports;
# itk/driver.py sends nested itk.Instruction chains into the first agent of
# every flow and checks that each hop's mark reaches the answer: every ordered
# pair with H as caller or callee and H->H, over jsonrpc, http_json and grpc,
# with the send, stream, push and resubscribe behaviours; the chains P->H->J
# and J->H->P; v0.3 and base64-text first hops into H; the card, errors,
# held tasks and resubscription against each agent directly (itk/driver.py).
#
#   HEDDLE_BIN    the heddle binary (default: target/debug/heddle, built with
#                 `cargo build -p heddle` when missing)
#   ITK_STANDIN=1 run H's slot with a second copy of the Python agent instead
#                 of heddle (to check the SDK agents and the driver alone)
#   ITK_JOBS      flows run at once (default 8)
#   ITK_LOG_LEVEL passed to the agents (INFO/DEBUG)
#
# Prints `PASS name` / `FAIL name: reason` / `SKIP name: reason` per flow, then
# `PASS stop X` per agent that exited within 10 s of SIGTERM (the kit's grace),
# and `itk: N passed, M failed` last; exits non-zero if anything failed. The
# agents are always stopped on exit; their logs are printed when something
# failed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

"$HERE/setup.sh"

standin="${ITK_STANDIN:-0}"
HEDDLE_BIN="${HEDDLE_BIN:-$ROOT/target/debug/heddle}"
if [ "$standin" != 1 ] && [ ! -x "$HEDDLE_BIN" ]; then
  echo "itk: $HEDDLE_BIN missing, running cargo build -p heddle"
  (cd "$ROOT" && cargo build -p heddle)
fi

work="$(mktemp -d -t heddle-itk.XXXXXX)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() {
  python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'
}

start_failures=0
agents=()
names=()
# start NAME CMD...: starts the agent with --httpPort/--grpcPort appended and
# waits (35 s at most) for its card; on success adds NAME=URL to $agents.
start() {
  local name="$1" http_port grpc_port pid url _
  shift
  read -r http_port grpc_port <<<"$(free_ports)"
  url="http://127.0.0.1:$http_port"
  "$@" --httpPort "$http_port" --grpcPort "$grpc_port" >"$work/$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  names+=("$name")
  for _ in $(seq 1 350); do
    if ! kill -0 "$pid" 2>/dev/null; then
      break
    fi
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "$url/.well-known/agent-card.json" 2>/dev/null; then
      echo "itk: $name serving on 127.0.0.1:$http_port (gRPC 127.0.0.1:$grpc_port): $*"
      agents+=(--agent "$name=$url")
      return 0
    fi
    sleep 0.1
  done
  echo "FAIL start $name: no card at $url/.well-known/agent-card.json within 35 s ($*)"
  start_failures=$((start_failures + 1))
  return 0
}

python_agent=("$HERE/.venv/bin/python" "$HERE/itk/python_agent.py")
if [ "$standin" = 1 ]; then
  echo "itk: ITK_STANDIN=1, H is a second Python SDK agent, not heddle"
  start H "${python_agent[@]}"
else
  start H "$HEDDLE_BIN" itk-agent
fi
start P "${python_agent[@]}"
start J node "$HERE/itk/js_agent.mjs"
# The same SDK agents as v0.3-only agents (card and calls), like the kit's
# agents on the SDKs' v0.3 lines.
start P3 "${python_agent[@]}" --protocol 0.3
start J3 node "$HERE/itk/js_agent.mjs" --protocol 0.3

out="$work/driver.out"
set +e
driver_flags=()
[ "$standin" = 1 ] && driver_flags+=(--standin)
timeout 300 "$HERE/.venv/bin/python" "$HERE/itk/driver.py" "${agents[@]}" "${driver_flags[@]}" \
  --jobs "${ITK_JOBS:-8}" | tee "$out" | grep -v '^itk: [0-9]* passed'
driver_rc=${PIPESTATUS[0]}
set -e

# The kit sends SIGTERM and escalates to SIGKILL after about 10 s: each agent
# must be gone by then.
stop_failures=0
for i in "${!pids[@]}"; do
  kill -TERM "${pids[$i]}" 2>/dev/null || continue
done
for i in "${!pids[@]}"; do
  for _ in $(seq 1 100); do
    kill -0 "${pids[$i]}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pids[$i]}" 2>/dev/null; then
    echo "FAIL stop ${names[$i]}: still running 10 s after SIGTERM"
    stop_failures=$((stop_failures + 1))
    kill -KILL "${pids[$i]}" 2>/dev/null || true
  else
    echo "PASS stop ${names[$i]}"
  fi
done >>"$out"
grep '^[A-Z]* stop ' "$out"

passed="$(grep -c '^PASS ' "$out" || true)"
failed="$(grep -c '^FAIL ' "$out" || true)"
failed=$((failed + start_failures))
if [ "$driver_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL driver: exit $driver_rc without a FAIL line"
  failed=1
fi
if [ "$failed" -gt 0 ]; then
  for log in "$work"/*.log; do
    echo "itk: agent $(basename "$log" .log) log (last 150 lines):" >&2
    tail -n 150 "$log" >&2
  done
fi
echo "itk: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
