#!/usr/bin/env bash
# Interop suite, reverse direction: Heddle's client (the `heddle` CLI) against
# agents served by the official A2A SDKs (servers/python_server.py on a2a-sdk,
# servers/js_server.mjs on @a2a-js/sdk), over every binding and version both
# sides speak: JSON-RPC 1.0, JSON-RPC 0.3, HTTP+JSON (REST) 1.0, gRPC 1.0 and
# gRPC 0.3 (`--binding grpc`, to the GRPC interface the card lists): the
# task flows and push-config CRUD; then the Python server again with a card
# that says it does not stream, to check the client's polling fallback.
#
#   HEDDLE_BIN  the heddle binary (default: target/debug/heddle, built with
#               `cargo build -p heddle` when missing)
#
# Prints `PASS python-jsonrpc-1.0 echo` / `FAIL ...: reason` per flow, `SKIP`
# for what one side does not speak, and `interop-client: N passed, N failed`
# last; exits non-zero if any flow failed. Servers are always stopped on exit.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

"$HERE/setup.sh"

HEDDLE_BIN="${HEDDLE_BIN:-$ROOT/target/debug/heddle}"
if [ ! -x "$HEDDLE_BIN" ]; then
  echo "interop-client: $HEDDLE_BIN missing, running cargo build -p heddle"
  (cd "$ROOT" && cargo build -p heddle)
fi

CHECK="$HERE/client_check.py"
CMD_TIMEOUT=60   # seconds, for every heddle invocation

work="$(mktemp -d -t heddle-interop-client.XXXXXX)"
server_pid=""
bg_pids=()
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
cleanup() {
  local pid
  for pid in "${bg_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
label=""
note=""

# ------------------------------------------------------------------ helpers

# run ARGS...: heddle ARGS with a timeout; stdout -> $work/out, stderr ->
# $work/err, exit code -> $rc, the command line -> $last_cmd.
run() {
  last_cmd="heddle $*"
  set +e
  timeout "$CMD_TIMEOUT" "$HEDDLE_BIN" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
}

# why TEXT: the reason the current flow fails.
why() { printf '%s\n' "$*" >"$work/why"; }

# expect_rc WANT: the last command exited WANT.
expect_rc() {
  if [ "$rc" -ne "$1" ]; then
    why "exit $rc, want $1: $(head -c 300 "$work/err" | tr '\n' ' ')"
    return 1
  fi
}

# chk CHECK ARGS...: client_check.py; its stdout on success, else the reason.
chk() {
  if python3 "$CHECK" "$@" >"$work/chk"; then
    cat "$work/chk"
  else
    cp "$work/chk" "$work/why"
    return 1
  fi
}

# flow NAME FUNCTION: runs one flow, prints PASS/FAIL.
flow() {
  local name="$1" fn="$2"
  rm -f "$work/why"
  note=""
  last_cmd=""
  : >"$work/out"
  : >"$work/err"
  if "$fn"; then
    passed=$((passed + 1))
    echo "PASS $label $name${note:+ ($note)}"
  else
    failed=$((failed + 1))
    echo "FAIL $label $name: $(cat "$work/why" 2>/dev/null || echo 'failed')"
    {
      echo "---- $label $name: $last_cmd (exit ${rc:-?})"
      echo "stdout:"; head -c 2000 "$work/out"; echo
      echo "stderr:"; head -c 4000 "$work/err"; echo
    } >&2
  fi
}

skip() { echo "SKIP $1 ($2)"; }

free_ports() {
  python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'
}

# start_server NAME CMD...: starts the server, waits for its card at $url.
start_server() {
  local name="$1"; shift
  "$@" >"$work/$name.log" 2>&1 &
  server_pid=$!
  local _
  for _ in $(seq 1 300); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      break
    fi
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "$url/.well-known/agent-card.json" 2>/dev/null; then
      echo "interop-client: $name serving on 127.0.0.1:$http_port (gRPC $grpc_port)"
      return 0
    fi
    sleep 0.1
  done
  echo "interop-client: $name did not serve $url/.well-known/agent-card.json; its log:" >&2
  cat "$work/$name.log" >&2
  stop_server
  return 1
}

# ------------------------------------------------------------------ flows
# Globals: url, binding, version, common (the CLI flags of this combination),
# echo_id and writer_id (set by the echo and multi-turn flows).

flow_card() {
  run card validate "$url"
  expect_rc 0 || return 1
  run card get "$url" -o json
  expect_rc 0 || return 1
  local ifaces
  ifaces="$(chk card "$work/out" "$grpc_port")" || return 1
  if ! python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2).close()' \
      "$grpc_port" 2>/dev/null; then
    why "the card lists gRPC at 127.0.0.1:$grpc_port but nothing listens there"
    return 1
  fi
  note="$ifaces; gRPC port listening"
}

flow_negotiate() {
  run send "$url" "echo negotiated" -o json --debug
  expect_rc 0 || return 1
  chk task "$work/out" COMPLETED --artifact negotiated >/dev/null || return 1
  note="picked: $(chk wire-summary "$work/err")" || return 1
}

flow_echo() {
  run send "$url" "echo hello" "${common[@]}" --debug
  expect_rc 0 || return 1
  echo_id="$(chk task "$work/out" COMPLETED --artifact hello)" || return 1
  note="wire: $(chk wire "$work/err" "$version" "$binding")" || return 1
}

flow_stream() {
  run send "$url" "stream x" --stream "${common[@]}" --debug
  expect_rc 0 || return 1
  chk stream "$work/out" "one two three" >/dev/null || return 1
  note="wire: $(chk wire "$work/err" "$version" "$binding")" || return 1
}

flow_multi_turn() {
  run send "$url" "write report" "${common[@]}"
  expect_rc 0 || return 1
  writer_id="$(chk task "$work/out" INPUT_REQUIRED --question)" || return 1
  run send "$url" "for the board" --task-id "$writer_id" "${common[@]}" --debug
  expect_rc 0 || return 1
  chk task "$work/out" COMPLETED --id "$writer_id" --artifact-contains "for the board" >/dev/null || return 1
  chk wire "$work/err" "$version" "$binding" >/dev/null || return 1
}

flow_get() {
  [ -n "$writer_id" ] || { why "the multi-turn flow gave no task id"; return 1; }
  run task get "$url" "$writer_id" "${common[@]}" --debug
  expect_rc 0 || return 1
  chk task "$work/out" COMPLETED --id "$writer_id" --artifact-contains "for the board" >/dev/null || return 1
  note="wire: $(chk wire "$work/err" "$version" "$binding")" || return 1
}

flow_list() {
  [ -n "$echo_id" ] && [ -n "$writer_id" ] || { why "the echo or multi-turn flow gave no task id"; return 1; }
  run task list "$url" "${common[@]}" --debug
  expect_rc 0 || return 1
  local count
  count="$(chk list "$work/out" "$echo_id" "$writer_id")" || return 1
  note="$count tasks; wire: $(chk wire "$work/err" "$version" "$binding")" || return 1
}

# `heddle send` has no non-blocking flag: stream "wait" in the background, take
# the task id from the first JSON line, cancel it, and watch the stream end.
flow_cancel() {
  local bg_out="$work/bg.out" bg_err="$work/bg.err" bg _ id state
  : >"$bg_out"
  timeout "$CMD_TIMEOUT" "$HEDDLE_BIN" send "$url" "wait" --stream "${common[@]}" \
    >"$bg_out" 2>"$bg_err" &
  bg=$!
  bg_pids+=("$bg")
  state=none
  for _ in $(seq 1 150); do   # until the task is WORKING (15 s at most)
    state="$(python3 "$CHECK" last-state "$bg_out" 2>/dev/null || echo none)"
    [ "$state" = TASK_STATE_WORKING ] && break
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$state" != TASK_STATE_WORKING ]; then
    why "the background 'wait' stream never reported WORKING (last state $state): $(head -c 300 "$bg_err")"
    kill "$bg" 2>/dev/null || true
    return 1
  fi
  id="$(chk first-task-id "$bg_out")" || { kill "$bg" 2>/dev/null || true; return 1; }
  run task cancel "$url" "$id" "${common[@]}" --debug
  expect_rc 0 || { kill "$bg" 2>/dev/null || true; return 1; }
  chk task "$work/out" CANCELED --id "$id" >/dev/null || { kill "$bg" 2>/dev/null || true; return 1; }
  local wire
  wire="$(chk wire "$work/err" "$version" "$binding")" || { kill "$bg" 2>/dev/null || true; return 1; }
  for _ in $(seq 1 100); do   # the stream must end well before the 30 s wait
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$bg" 2>/dev/null; then
    kill "$bg" 2>/dev/null || true
    why "the background stream did not end within 10 s of the cancel"
    return 1
  fi
  local bg_rc=0
  wait "$bg" || bg_rc=$?
  state="$(python3 "$CHECK" last-state "$bg_out" 2>/dev/null || echo none)"
  if [ "$bg_rc" -ne 0 ] && [ "$bg_rc" -ne 1 ]; then
    why "the background stream exited $bg_rc (want 0 or 1): $(head -c 300 "$bg_err")"
    return 1
  fi
  note="background stream: exit $bg_rc, last state $state; wire: $wire"
}

# push-config: on a task waiting for input, set (with an id, token and
# authentication; then without an id), get, list, delete, list again. The
# first set runs with --debug and its wire is checked.
flow_push_config() {
  local id other wire hook="http://127.0.0.1:9/heddle-interop"
  run send "$url" "write report" "${common[@]}"
  expect_rc 0 || return 1
  id="$(chk task "$work/out" INPUT_REQUIRED --question)" || return 1
  run task push-config set "$url" "$id" "$hook" --id c1 --token tok \
    --auth-scheme Bearer --auth-credentials cred "${common[@]}" --debug
  expect_rc 0 || return 1
  chk push-config "$work/out" "$id" --id c1 --url "$hook" --token tok --auth Bearer >/dev/null || return 1
  wire="$(chk wire "$work/err" "$version" "$binding")" || return 1
  run task push-config set "$url" "$id" "$hook/2" "${common[@]}"
  expect_rc 0 || return 1
  other="$(chk push-config "$work/out" "$id" --url "$hook/2")" || return 1
  run task push-config get "$url" "$id" c1 "${common[@]}"
  expect_rc 0 || return 1
  chk push-config "$work/out" "$id" --id c1 --token tok --auth Bearer >/dev/null || return 1
  run task push-config list "$url" "$id" "${common[@]}"
  expect_rc 0 || return 1
  chk push-list "$work/out" c1 "$other" >/dev/null || return 1
  run task push-config delete "$url" "$id" c1 "${common[@]}"
  if [ "$label" = python-rest-0.3 ] && [ "$rc" -eq 2 ] && grep -q 'HTTP 404' "$work/err"; then
    # a2a-sdk 1.3.0's v0.3 REST adapter registers no DELETE route.
    note="set/get/list ok; delete: HTTP 404 (the SDK's v0.3 REST has no DELETE route); wire: $wire"
    return 0
  fi
  expect_rc 0 || return 1
  run task push-config list "$url" "$id" "${common[@]}"
  expect_rc 0 || return 1
  chk push-list "$work/out" "$other" >/dev/null || return 1
  note="configs c1 and $other, c1 deleted; wire: $wire"
}

# polled-stream (server card: streaming false): `send --stream` polls
# GetTask instead; the output is task snapshots ending COMPLETED, and no
# streaming method went on the wire.
flow_polled_stream() {
  local n
  run send "$url" "stream x" --stream "${common[@]}" --debug
  expect_rc 0 || return 1
  n="$(chk polled "$work/out" "one two three")" || return 1
  if grep -Eq 'message:stream|SendStreamingMessage|message/stream' "$work/err"; then
    why "a stream was asked of an agent whose card says it does not stream"
    return 1
  fi
  note="$n snapshots; wire: $(chk wire "$work/err" "$version" "$binding")" || return 1
}

# wait (server card: streaming false): `send --return-immediately --wait`
# prints the task once it is COMPLETED.
flow_wait() {
  local polls
  run send "$url" "stream x" --return-immediately --wait "${common[@]}" --debug
  expect_rc 0 || return 1
  chk task "$work/out" COMPLETED --artifact "one two three" >/dev/null || return 1
  polls="$(grep -Ec '"(GetTask|tasks/get)"|^> GET .*/tasks/|^> gRPC GetTask ' "$work/err" || true)"
  note="GetTask calls: $polls"
}

# client_flows SERVER: every binding x version combination against $url.
client_flows() {
  local server="$1" combo
  label="$server"
  flow card flow_card
  flow negotiate flow_negotiate
  for combo in "jsonrpc 1.0" "jsonrpc 0.3" "rest 1.0" "rest 0.3" "grpc 1.0" "grpc 0.3"; do
    read -r binding version <<<"$combo"
    label="$server-$binding-$version"
    common=(--binding "$binding" --a2a-version "$version" -o json)
    echo_id=""
    writer_id=""
    flow echo flow_echo
    flow stream flow_stream
    flow multi-turn flow_multi_turn
    flow get flow_get
    if [ "$version" = 1.0 ]; then
      flow list flow_list   # A2A 0.3 has no ListTasks
    fi
    flow cancel flow_cancel
    flow push-config flow_push_config
  done
}

# polling_flows SERVER: every combination against $url, whose card says the
# agent does not stream.
polling_flows() {
  local server="$1" combo
  for combo in "jsonrpc 1.0" "jsonrpc 0.3" "rest 1.0" "rest 0.3" "grpc 1.0" "grpc 0.3"; do
    read -r binding version <<<"$combo"
    label="$server-$binding-$version"
    common=(--binding "$binding" --a2a-version "$version" -o json)
    flow polled-stream flow_polled_stream
    flow wait flow_wait
  done
}

# ------------------------------------------------------------------ servers

read -r http_port grpc_port <<<"$(free_ports)"
url="http://127.0.0.1:$http_port"
if start_server python "$HERE/.venv/bin/python" "$HERE/servers/python_server.py" "$http_port" "$grpc_port"; then
  client_flows python
  stop_server
else
  failed=$((failed + 1))
  echo "FAIL python server: did not start"
fi

read -r http_port grpc_port <<<"$(free_ports)"
url="http://127.0.0.1:$http_port"
if start_server python-nostream "$HERE/.venv/bin/python" "$HERE/servers/python_server.py" \
    "$http_port" "$grpc_port" --no-streaming; then
  polling_flows python-nostream
  stop_server
else
  failed=$((failed + 1))
  echo "FAIL python-nostream server: did not start"
fi

read -r http_port grpc_port <<<"$(free_ports)"
url="http://127.0.0.1:$http_port"
if start_server js node "$HERE/servers/js_server.mjs" "$http_port" "$grpc_port"; then
  client_flows js
  stop_server
else
  failed=$((failed + 1))
  echo "FAIL js server: did not start"
fi

if [ "$failed" -gt 0 ]; then
  for log in "$work"/*.log; do
    echo "interop-client: $(basename "$log" .log) server log:" >&2
    tail -n 100 "$log" >&2
  done
fi
echo "interop-client: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
