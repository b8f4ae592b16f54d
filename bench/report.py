"""Writes bench/run.sh's results as markdown: one table per scenario with each
figure's ratio to the floor, the memory figures, and the issue's targets with
whether this run met them.

Usage: report.py RUNS_JSONL META_JSON   (bench/run.sh calls it)
"""

import datetime
import json
import os
import platform
import statistics
import sys

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")

runs = [json.loads(line) for line in open(sys.argv[1])] if os.path.getsize(sys.argv[1]) else []
meta = json.loads(sys.argv[2])
ran = {r["server"] for r in runs}
v = meta["versions"]

NAMES = {
    "floor": "bare hyper + serde_json (floor)",
    "lean": "bare hyper + typed serde (lean floor)",
    "heddle": "Heddle, memory store",
    "sqlite": "Heddle, SQLite store",
    "other": "official Rust SDK (a2a-server-lf)",
    "ra2a": f"ra2a {v.get('ra2a', '?')} (crates.io)",
    "python": "official Python SDK (a2a-sdk, uvicorn)",
    "js": "official JS SDK (@a2a-js/sdk, express)",
    # The durable stores (issue 24): each SDK on its own SQLite and PostgreSQL store.
    "pysqlite": "official Python SDK, DatabaseTaskStore on SQLite",
    "turulsqlite": f"turul-a2a {v.get('turul-a2a', '?')}, SQLite store",
    "pg": "Heddle, PostgreSQL store",
    "pypg": "official Python SDK, DatabaseTaskStore on PostgreSQL",
    "turulpg": f"turul-a2a {v.get('turul-a2a', '?')}, PostgreSQL store",
}
ORDER = list(NAMES)
# The floor of each scenario: the gRPC one is bare hyper HTTP/2 + prost.
FLOOR_NAMES = {"grpc": "bare hyper HTTP/2 + prost (gRPC floor)"}


def name(server, scenario):
    return FLOOR_NAMES.get(scenario, NAMES[server]) if server == "floor" else NAMES[server]


def cells(scenario, server, conns):
    return [r for r in runs if r["scenario"] == scenario and r["server"] == server
            and r["result"]["connections"] == conns]


def med(scenario, server, conns, key):
    vals = [r["result"].get(key, 0) for r in cells(scenario, server, conns)]
    return statistics.median(vals) if vals else None


def cpu_per(scenario, server, conns, key="requests"):
    """Server CPU (user + system) per request (or event), over the whole cell including warm-up."""
    vals = []
    for r in cells(scenario, server, conns):
        res = r["result"]
        done = res.get(key, 0) * (1 + 1 / max(res["seconds"], 0.01))
        vals.append(r["cpu_ticks"] * TICK_US / max(1, done))
    return statistics.median(vals) if vals else None


def fmt(x, spec=",.0f"):
    return "–" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or not b else a / b


def servers_in(scenario):
    return [s for s in ORDER if any(r["scenario"] == scenario and r["server"] == s for r in runs)]


def conns_in(scenario):
    return sorted({r["result"]["connections"] for r in runs if r["scenario"] == scenario})


def unary_table(scenario, floor_scenario):
    print("| server | connections | requests/s | × floor | p50 µs | p99 µs | p99 × floor "
          "| server CPU µs/request | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in conns_in(scenario):
        f_rps = med(floor_scenario, "floor", c, "rps")
        f_p99 = med(floor_scenario, "floor", c, "p99_us")
        for s in servers_in(scenario):
            rps, p99 = med(scenario, s, c, "rps"), med(scenario, s, c, "p99_us")
            errors = sum(r["result"]["errors"] for r in cells(scenario, s, c))
            print(f"| {name(s, scenario)} | {c} | {fmt(rps)} | {fmt(ratio(rps, f_rps), '.2f')} "
                  f"| {fmt(med(scenario, s, c, 'p50_us'))} | {fmt(p99)} "
                  f"| {fmt(ratio(p99, f_p99), '.2f')} | {fmt(cpu_per(scenario, s, c), '.1f')} | {errors} |")
    print()


now = datetime.datetime.now(datetime.timezone.utc)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"# Benchmark suite, {now:%Y-%m-%d %H:%M} UTC\n")
if meta.get("note"):
    print(f"**{meta['note']}**\n")
print(f"- Heddle commit {v.get('commit')}, {v.get('rustc')}; official Rust SDK a2a-lf {v.get('a2a-lf', '?')} "
      f"+ a2a-server-lf {v.get('a2a-server-lf', '?')}; ra2a {v.get('ra2a', '?')}; a2a-sdk {v.get('a2a-sdk', '?')} "
      f"on {v.get('python', '?')} (uvicorn, one worker); @a2a-js/sdk {v.get('@a2a-js/sdk', '?')} on Node "
      f"{v.get('node', '?')}")
if ran & {"turulsqlite", "turulpg"}:
    print(f"- turul-a2a {v.get('turul-a2a', '?')} (crates.io, features sqlite and postgres)")
print(f"- machine: {platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores; every server "
      "pinned to one core, the load generator (bench/loadgen) to another")
print(f"- {meta['rounds']} interleaved rounds of {meta['secs']} s per cell after a 1 s warm-up; medians")
print("- every server runs the same two agents: echo (a COMPLETED task, the text as one artifact) and "
      "writer-stream (WORKING, one artifact in three chunks, COMPLETED); requests carry `A2A-Version: 1.0`")
print("- HTTP/1.1 keep-alive connections; gRPC: that many concurrent calls over one HTTP/2 connection; "
      "server CPU is user + system time of the server process per request")
if any(r["server"] == "ra2a" for r in runs):
    print("- ra2a's JSON-RPC binding takes the same v1.0 payloads but only under the v0.3 method names, "
          "so it gets `message/send`, `message/stream` and `tasks/get`; it has no REST row (0.10.1's REST "
          "router panics while building its routes), and its streams are ended after the terminal event "
          "(0.10.1 never ends them itself)")
if ran & {"turulsqlite", "turulpg"}:
    print("- turul-a2a speaks v1.0 only (its `compat-v03` feature is off); its stream sends five events, "
          "not six: the framework stores WORKING before the stream opens, so the first event is the task "
          "already WORKING; its SQLite file is in WAL mode with the crate's default synchronous=FULL")
if ran & {"pysqlite", "pypg"}:
    print("- the official Python SDK's DatabaseTaskStore (SQLAlchemy async, aiosqlite / asyncpg, "
          "the default pool) writes the whole task row once per event; its SQLite file runs WAL "
          "with synchronous=NORMAL, as Heddle's")
print()

if any(r["scenario"] == "unary" for r in runs):
    print("## SendMessage, JSON-RPC\n")
    unary_table("unary", "unary")
if any(r["scenario"] == "rest" for r in runs):
    print("## SendMessage, HTTP+JSON (REST)\n\n× floor: against the floor's JSON-RPC figure.\n")
    unary_table("rest", "unary")
if any(r["scenario"] == "grpc" for r in runs):
    print("## SendMessage, gRPC\n\n× floor: against the gRPC floor (bare hyper HTTP/2 + prost, the same "
          "echo task as protobuf) when it ran, else the floor's JSON-RPC figure.\n")
    unary_table("grpc", "grpc" if servers_in("grpc")[:1] == ["floor"] else "unary")
if any(r["scenario"] == "get" for r in runs):
    print("## GetTask, JSON-RPC\n\nOne stored task read again and again.\n")
    unary_table("get", "get")
if any(r["scenario"] == "stream" for r in runs):
    print("## SendStreamingMessage, JSON-RPC + SSE\n")
    print("Each stream: the task, WORKING, three artifact chunks, COMPLETED (6 events; "
          "the floor writes the same events in one go).\n")
    print("| server | streams | events/s | × floor | streams/s | p50 µs per stream | p99 µs per stream "
          "| server CPU µs/event | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in conns_in("stream"):
        f_eps = med("stream", "floor", c, "events_per_s")
        for s in servers_in("stream"):
            eps = med("stream", s, c, "events_per_s")
            errors = sum(r["result"]["errors"] for r in cells("stream", s, c))
            print(f"| {NAMES[s]} | {c} | {fmt(eps)} | {fmt(ratio(eps, f_eps), '.2f')} "
                  f"| {fmt(med('stream', s, c, 'rps'))} | {fmt(med('stream', s, c, 'p50_us'))} "
                  f"| {fmt(med('stream', s, c, 'p99_us'))} | {fmt(cpu_per('stream', s, c, 'events'), '.1f')} "
                  f"| {errors} |")
    print()

print("## Memory\n")
idle, final = meta.get("idle_rss_kb", {}), meta.get("final_rss_kb", {})
if idle:
    print("| server | RSS idle, MB | RSS after the throughput runs, MB |")
    print("|---|---|---|")
    for s in ORDER:
        if s in idle:
            print(f"| {NAMES[s]} | {idle[s] / 1024:.1f} | {final.get(s, 0) / 1024:.1f} |")
    if ran & {"heddle", "other", "ra2a", "python", "js"}:
        print("\nThe SDKs' in-memory task stores are unbounded; Heddle's keeps the 10,000 most recent "
              "finished tasks.")
    print()
m = meta.get("million") or {}
growth = None
if m:
    growth = (m["at1m_kb"] - m["at100k_kb"]) / m["at100k_kb"] * 100
    print(f"- `heddle serve --store memory`, a fresh process: idle {m['idle_kb'] / 1024:.1f} MB, after 100k "
          f"sends {m['at100k_kb'] / 1024:.1f} MB, after 1M sends {m['at1m_kb'] / 1024:.1f} MB "
          f"({growth:+.1f}% from 100k to 1M).")
h = meta.get("held") or {}
if h:
    print(f"- {h['open']:,} idle SSE streams (SendStreamingMessage to writer-stream paused for ten minutes "
          f"after WORKING, one connection each; {h['failed']} failed to open, {h.get('ended_early', 0)} ended "
          f"early; opened in {h['open_secs']} s): RSS {h['idle_kb'] / 1024:.1f} MB before, "
          f"{h['held_kb'] / 1024:.1f} MB with them open.")
hf = meta.get("held_floor") or {}
if hf:
    print(f"- The floor holding {hf['open']:,} such streams (POST /hold: the same two first events, then "
          f"silence; {hf['failed']} failed to open, {hf.get('ended_early', 0)} ended early): RSS "
          f"{hf['idle_kb'] / 1024:.1f} MB before, {hf['held_kb'] / 1024:.1f} MB with them open.")
    if h and hf["open"] and h["open"] and hf["held_kb"] > hf["idle_kb"]:
        per = lambda x: (x["held_kb"] - x["idle_kb"]) * 1024 / x["open"]
        print(f"  Per stream: Heddle {per(h) / 1024:.1f} KB, the floor {per(hf) / 1024:.1f} KB "
              f"({per(h) / per(hf):.2f}× the floor); hyper's HTTP/1 connection alone keeps an 8 KB read and "
              f"an 8 KB write buffer.")
print()


def target(label, value, goal, op, unit="×"):
    if value is None:
        print(f"| {label} | not measured | {op} {goal}{unit} | – |")
        return
    met = value >= goal if op == "≥" else value <= goal
    print(f"| {label} | {value:.2f}{unit} | {op} {goal}{unit} | {'met' if met else '**not met**'} |")


def store_targets():
    """Issue 24: the SQLite store against the floor, and each durable store against the
    official Python SDK's and turul-a2a's on the same engine."""
    print("## Targets (issue 24), durable stores, as ratios in this run\n")
    sc = meta.get("streams")
    if "sqlite" in ran:
        print("| figure | measured | target | |")
        print("|---|---|---|---|")
        for c in (16, 64):
            target(f"Heddle SQLite / floor, unary JSON-RPC requests/s at {c}",
                   ratio(med("unary", "sqlite", c, "rps"), med("unary", "floor", c, "rps")), 0.5, "≥")
            target(f"Heddle SQLite p99 / floor p99 at {c}",
                   ratio(med("unary", "sqlite", c, "p99_us"), med("unary", "floor", c, "p99_us")), 3, "≤")
        target(f"Heddle SQLite / floor, streaming events/s at {sc} streams",
               ratio(med("stream", "sqlite", sc, "events_per_s"), med("stream", "floor", sc, "events_per_s")),
               0.4, "≥")
        print()
    # Streams, not events: turul-a2a's stream has five events to the others' six (its task
    # is already WORKING when the stream opens).
    print("Heddle's figure over the peer's on the same engine, same run (a peer's rate counts "
          "its failed requests too: see the errors columns):\n")
    print("| Heddle against | store | unary requests/s at 16 | at 64 | streams/s |")
    print("|---|---|---|---|---|")
    for ours, engine in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
        for peer, label in (("py", "official Python SDK"), ("turul", "turul-a2a")):
            theirs = peer + ours
            if ours not in ran or theirs not in ran:
                continue
            u = [fmt(ratio(med("unary", ours, c, "rps"), med("unary", theirs, c, "rps")), ".2f") + "×"
                 for c in (16, 64)]
            st = fmt(ratio(med("stream", ours, sc, "rps"), med("stream", theirs, sc, "rps")), ".2f") + "×"
            print(f"| {label} | {engine} | {u[0]} | {u[1]} | {st} |")
    print()


if ran & {"sqlite", "pg"}:
    store_targets()
if "heddle" not in ran:
    sys.exit(0)

print("## Targets (issue 18), as ratios in this run\n")
print("| figure | measured | target | |")
print("|---|---|---|---|")
for c in (16, 64):
    target(f"Heddle / floor, unary JSON-RPC requests/s at {c}",
           ratio(med("unary", "heddle", c, "rps"), med("unary", "floor", c, "rps")), 0.85, "≥")
    target(f"Heddle CPU per request / lean floor's at {c}",
           ratio(cpu_per("unary", "heddle", c), cpu_per("unary", "lean", c)), 2, "≤")
sc18 = meta.get("streams")
target(f"Heddle / floor, streaming events/s at {sc18} streams",
       ratio(med("stream", "heddle", sc18, "events_per_s"), med("stream", "floor", sc18, "events_per_s")), 0.65, "≥")
h18, hf18 = meta.get("held") or {}, meta.get("held_floor") or {}
if h18.get("open") and hf18.get("open"):
    per18 = lambda m: (m["held_kb"] - m["idle_kb"]) / max(1, m["open"])
    target("Heddle's memory per idle SSE stream / bare hyper's", per18(h18) / per18(hf18), 1.5, "≤")
else:
    target("Heddle's memory per idle SSE stream / bare hyper's", None, 1.5, "≤")
print()

print("## Targets (issue 8), as ratios in this run\n")
print("| figure | measured | target | |")
print("|---|---|---|---|")
for c in (16, 64):
    h_rps, h_p99 = med("unary", "heddle", c, "rps"), med("unary", "heddle", c, "p99_us")
    target(f"Heddle / floor, unary JSON-RPC requests/s at {c}", ratio(h_rps, med("unary", "floor", c, "rps")), 0.7, "≥")
    target(f"Heddle p99 / floor p99 at {c}", ratio(h_p99, med("unary", "floor", c, "p99_us")), 1.5, "≤")
    target(f"Heddle / official Rust SDK (a2a-lf) at {c}", ratio(h_rps, med("unary", "other", c, "rps")), 2, "≥")
    target(f"Heddle / ra2a at {c}", ratio(h_rps, med("unary", "ra2a", c, "rps")), 2, "≥")
    target(f"Heddle / official JS SDK at {c}", ratio(h_rps, med("unary", "js", c, "rps")), 15, "≥")
    target(f"Heddle / official Python SDK at {c}", ratio(h_rps, med("unary", "python", c, "rps")), 100, "≥")
sc = meta.get("streams")
h_eps = med("stream", "heddle", sc, "events_per_s")
target(f"Heddle / floor, streaming events/s at {sc} streams", ratio(h_eps, med("stream", "floor", sc, "events_per_s")), 0.5, "≥")
target("Heddle / official Rust SDK (a2a-lf), streaming events/s",
       ratio(h_eps, med("stream", "other", sc, "events_per_s")), 5, "≥")
target("Heddle / ra2a, streaming events/s", ratio(h_eps, med("stream", "ra2a", sc, "events_per_s")), 5, "≥")
if h:
    if h["open"] + h["failed"] >= 10_000:  # failed streams count against it, not out of it
        target(f"RSS with {h['open']:,} idle SSE streams", h["held_kb"] / 1024, 150, "≤", " MB")
    else:  # a short run: the target is for 10,000
        print(f"| RSS with {h['open']:,} idle SSE streams | {h['held_kb'] / 1024:.2f} MB | ≤ 150 MB at 10,000 | – |")
    if hf:
        print(f"| (the floor with {hf['open']:,} streams: {hf['held_kb'] / 1024:.1f} MB) | | | |")
else:
    target("RSS with 10,000 idle SSE streams", None, 150, "≤", " MB")
target("RSS growth from 100k to 1M sends", growth, 10, "≤", "%")

print("\n## Targets (issue 4): the other bindings against JSON-RPC, Heddle, memory store\n")
print("| figure | measured | target | |")
print("|---|---|---|---|")
for c in (16, 64):
    # "Within 10%": no more than 10% below JSON-RPC (faster is fine).
    target(f"REST / JSON-RPC requests/s at {c}",
           ratio(med("rest", "heddle", c, "rps"), med("unary", "heddle", c, "rps")), 0.9, "≥")
target("gRPC / JSON-RPC requests/s at 64", ratio(med("grpc", "heddle", 64, "rps"), med("unary", "heddle", 64, "rps")), 1.3, "≥")
# What the bare stack gives: hyper's HTTP/2 + prost against hyper's HTTP/1 + serde_json.
f_grpc = ratio(med("grpc", "floor", 64, "rps"), med("unary", "floor", 64, "rps"))
if f_grpc is not None:
    print(f"\nFor scale: the floors' gRPC / JSON-RPC at 64 is {f_grpc:.2f}×, and Heddle's gRPC is "
          f"{fmt(ratio(med('grpc', 'heddle', 64, 'rps'), med('grpc', 'floor', 64, 'rps')), '.2f')}× the gRPC floor.")
