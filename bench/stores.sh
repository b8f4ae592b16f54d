#!/usr/bin/env bash
# Durable stores side by side (issue 24): Heddle on SQLite and on PostgreSQL against the
# official Python SDK's DatabaseTaskStore and turul-a2a's stores on the same two engines,
# with the bare hyper floor for scale, in one bench/run.sh run:
#
#   bench/stores.sh              # writes bench/results/<UTC date>-stores.md
#
# SendMessage at 16 and 64 connections, 64 concurrent streams, GetTask; every other
# bench/run.sh knob (ROUNDS, SECS, PG, NOTE, OUT) passes through. About 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export SERVERS=${SERVERS:-floor sqlite pysqlite turulsqlite pg pypg turulpg}
export SCENARIOS=${SCENARIOS:-unary stream get}
export CONNS=${CONNS:-16 64}
export MILLION=0 IDLE_STREAMS=0
export OUT=${OUT:-bench/results/$(date -u +%F)-stores.md}
exec bench/run.sh
