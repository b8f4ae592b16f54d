#!/usr/bin/env bash
# The hub's web console in a real browser: Debian's headless Chromium
# (/usr/bin/chromium, installed from apt when missing and this runs as root),
# driven by playwright-core, which never downloads a browser of its own.
#
# Starts two hubs from HEDDLE_BIN (default target/debug/heddle): the one under
# test, with authentication on, an API key and an admin token; and a second,
# open one whose echo agent the test registers as a remote agent by its card
# URL. Then runs console.test.mjs with node's test runner. Screenshots of
# every page go to target/console-screenshots/.
#
#   HEDDLE_REQUIRE_BROWSER=1   fail, rather than skip, when Chromium is missing
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$CHROMIUM" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "console: installing Debian's chromium"
  # A machine whose package lists are stale or absent needs them read first.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
  }
fi
if [ ! -x "$CHROMIUM" ]; then
  if [ "${HEDDLE_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "console: $CHROMIUM missing (apt-get install chromium)" >&2
    exit 1
  fi
  echo "SKIPPED console browser tests: $CHROMIUM missing (apt-get install chromium)"
  exit 0
fi

lock="$HERE/package-lock.json"
if [ -d "$HERE/node_modules" ] && cmp -s "$lock" "$HERE/node_modules/.console-lock"; then
  echo "console: node_modules up to date"
else
  (cd "$HERE" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  cp "$lock" "$HERE/node_modules/.console-lock"
fi

HEDDLE_BIN="${HEDDLE_BIN:-$ROOT/target/debug/heddle}"
[ -x "$HEDDLE_BIN" ] || (cd "$ROOT" && cargo build -p heddle)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work="$(mktemp -d -t heddle-console.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hub_port="$(free_port)"
remote_port="$(free_port)"
admin_token="console-test-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
user_key="$("$HEDDLE_BIN" keys create --name console-user --store "sqlite:$work/hub.db")"

HEDDLE_ADMIN_TOKEN="$admin_token" "$HEDDLE_BIN" serve --store "sqlite:$work/hub.db" \
  --listen "127.0.0.1:$hub_port" --grpc-listen 127.0.0.1:0 --require-auth \
  --admin-token-file "$work/admin-token" >"$work/hub.log" 2>&1 &
pids+=($!)
HEDDLE_ADMIN_TOKEN="remote-admin-token-0123456789" "$HEDDLE_BIN" serve --store memory \
  --listen "127.0.0.1:$remote_port" --grpc-listen 127.0.0.1:0 \
  --admin-token-file "$work/remote-admin-token" >"$work/remote.log" 2>&1 &
pids+=($!)
for port in "$hub_port" "$remote_port"; do
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
done

mkdir -p "$ROOT/target/console-screenshots"
status=0
HUB_URL="http://127.0.0.1:$hub_port" \
REMOTE_CARD_URL="http://127.0.0.1:$remote_port/api/v1/agents/echo/.well-known/agent-card.json" \
ADMIN_TOKEN="$admin_token" USER_KEY="$user_key" CHROMIUM="$CHROMIUM" \
SCREENSHOTS="$ROOT/target/console-screenshots" \
  node --test --test-concurrency=1 "$HERE/console.test.mjs" || status=$?
if [ "$status" != 0 ]; then
  echo "console: the hub's log:" >&2
  tail -n 40 "$work/hub.log" >&2
fi
exit "$status"
