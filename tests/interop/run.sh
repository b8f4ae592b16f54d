#!/usr/bin/env bash
# Interop suite: the official A2A SDK clients (Python a2a-sdk, JS @a2a-js/sdk)
# against a fresh `heddle serve`, each over JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0,
# gRPC 1.0 and gRPC 0.3 (the clients pick the interface from the agent card);
# then the Python SDK registers a push webhook on each and parses what arrives
# (python/push_flows.py).
#
#   HEDDLE_BIN  the heddle binary (default: target/debug/heddle, built with
#               `cargo build -p heddle` when missing)
#
# Exits non-zero if any flow failed. The server is always stopped on exit.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

"$HERE/setup.sh"

HEDDLE_BIN="${HEDDLE_BIN:-$ROOT/target/debug/heddle}"
if [ ! -x "$HEDDLE_BIN" ]; then
  echo "interop: $HEDDLE_BIN missing, running cargo build -p heddle"
  (cd "$ROOT" && cargo build -p heddle)
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp -t heddle-interop.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Push deliveries go to the SDK flows' own webhook on 127.0.0.1, over http.
"$HEDDLE_BIN" serve --store memory --listen "127.0.0.1:$port" --grpc-listen 127.0.0.1:0 \
  --push-allow 127.0.0.1/32 --push-allow-http >"$log" 2>&1 &
server_pid=$!

base="http://127.0.0.1:$port/api/v1/agents"
card="$base/echo/.well-known/agent-card.json"
ready=""
for _ in $(seq 1 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    break
  fi
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$card" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "interop: heddle did not serve $card; server log:" >&2
  cat "$log" >&2
  exit 1
fi
grpc_addr="$(sed -n 's/^  gRPC  *\([^ ]*\) .*/\1/p' "$log" | head -n1)"
echo "interop: heddle serving on 127.0.0.1:$port (gRPC ${grpc_addr:-not announced})"

out="$(mktemp -t heddle-interop-out.XXXXXX)"
trap 'cleanup; rm -f "$out"' EXIT
failed_runs=0
run_client() {
  local name="$1"; shift
  echo "interop: $name"
  if ! "$@" 2>"$out.err" | tee -a "$out"; then
    failed_runs=$((failed_runs + 1))
    echo "interop: $name FAILED; its stderr:" >&2
    cat "$out.err" >&2
  fi
  rm -f "$out.err"
}
py=("$HERE/.venv/bin/python" "$HERE/python/client_flows.py")
js=(node "$HERE/js/client_flows.mjs")
push=("$HERE/.venv/bin/python" "$HERE/python/push_flows.py")
run_client python-v1        "${py[@]}" "$base" 1.0 JSONRPC
run_client python-v0.3      "${py[@]}" "$base" 0.3 JSONRPC
run_client python-rest-v1   "${py[@]}" "$base" 1.0 HTTP+JSON
run_client python-grpc-v1   "${py[@]}" "$base" 1.0 GRPC
run_client python-grpc-v0.3 "${py[@]}" "$base" 0.3 GRPC
run_client python-push-v1        "${push[@]}" "$base" 1.0 JSONRPC
run_client python-push-v0.3      "${push[@]}" "$base" 0.3 JSONRPC
run_client python-push-rest-v1   "${push[@]}" "$base" 1.0 HTTP+JSON
run_client python-push-grpc-v1   "${push[@]}" "$base" 1.0 GRPC
run_client python-push-grpc-v0.3 "${push[@]}" "$base" 0.3 GRPC
run_client js-v1            "${js[@]}" "$base" 1.0 JSONRPC
run_client js-v0.3          "${js[@]}" "$base" 0.3 JSONRPC
run_client js-rest-v1       "${js[@]}" "$base" 1.0 HTTP+JSON
run_client js-grpc-v1       "${js[@]}" "$base" 1.0 GRPC
run_client js-grpc-v0.3     "${js[@]}" "$base" 0.3 GRPC

passed="$(grep -c '^PASS ' "$out" || true)"
failed="$(grep -c '^FAIL ' "$out" || true)"
if [ "$failed_runs" -gt 0 ] && [ "$failed" -eq 0 ]; then
  failed="$failed_runs"   # a client died without reporting its flows
fi
if [ "$failed" -gt 0 ]; then
  echo "interop: server log:" >&2
  cat "$log" >&2
fi
echo "interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$failed_runs" -eq 0 ]
