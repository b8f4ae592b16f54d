#!/usr/bin/env bash
# Installs the pinned official A2A SDKs (clients and servers) for the interop tests,
# and the MCP servers behind the hub's `kind = "mcp"` agents' tests:
#   tests/interop/.venv          python3 -m venv + pip install -r python/requirements.txt
#                                -r python/server-requirements.txt (a2a-sdk, and
#                                mcp==2.3.0 for python/mcp_server.py)
#   tests/interop/node_modules   npm ci from package.json + package-lock.json (@a2a-js/sdk,
#                                and @modelcontextprotocol/server-everything 2026.8.31:
#                                node node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio)
# Idempotent: each install is skipped while its stamp matches its pin files.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"

venv="$HERE/.venv"
req="$HERE/python/requirements.txt"
server_req="$HERE/python/server-requirements.txt"
pins="$(cat "$req" "$server_req")"
if [ -x "$venv/bin/python" ] && [ -f "$venv/.interop-requirements" ] &&
   [ "$pins" = "$(cat "$venv/.interop-requirements")" ]; then
  echo "setup: python venv up to date"
else
  echo "setup: creating $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input -r "$req" -r "$server_req"
  printf '%s\n' "$pins" >"$venv/.interop-requirements"
fi

lock="$HERE/package-lock.json"
if [ -d "$HERE/node_modules" ] && cmp -s "$lock" "$HERE/node_modules/.interop-lock"; then
  echo "setup: node_modules up to date"
else
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  cp "$lock" "$HERE/node_modules/.interop-lock"
fi
