"""Wire compatibility: Heddle's protobuf bytes against the Python SDK's
generated protobuf types (a2a-sdk 1.3.0).

Usage: wire_compat.py DIR

DIR holds, per sample NAME (written by crates/heddle-hub/tests/wire_compat.rs):
  NAME.type   "v1 Task" / "v03 Message": proto package and message name
  NAME.bin    the message encoded by Heddle (prost)
  NAME.json   Heddle's ProtoJSON of the same message

For each sample this parses NAME.bin with the SDK's type
(v1: a2a.types.a2a_pb2, package lf.a2a.v1; v03: a2a.compat.v0_3.a2a_v0_3_pb2,
package a2a.v1), checks that json_format.MessageToDict of it equals NAME.json
(both parsed as JSON), and writes NAME.py.bin: the Python encoding of
json_format.ParseDict(NAME.json, Type()), which the Rust test decodes with prost
and compares with the original. Prints one PASS/FAIL line per sample; exits 1
if any failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from google.protobuf import json_format

from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as v1

MODULES = {'v1': v1, 'v03': v03}


def canonical(value):
    """JSON numbers: ProtoJSON may print a Struct number as 1 or 1.0."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def check_one(directory: Path, name: str) -> str | None:
    package, type_name = (directory / f'{name}.type').read_text().split()
    cls = getattr(MODULES[package], type_name)
    heddle_bytes = (directory / f'{name}.bin').read_bytes()
    heddle_json = json.loads((directory / f'{name}.json').read_text())

    decoded = cls()
    decoded.ParseFromString(heddle_bytes)
    # A field the SDK does not know would survive only as an unknown field
    # and be missing from MessageToDict below, so the JSON comparison
    # catches it.
    python_json = json_format.MessageToDict(decoded)
    if canonical(python_json) != canonical(heddle_json):
        return ('decoded bytes differ from Heddle ProtoJSON:\n  python '
                f'{json.dumps(python_json, sort_keys=True)}\n  heddle '
                f'{json.dumps(heddle_json, sort_keys=True)}')

    parsed = json_format.ParseDict(heddle_json, cls())
    if parsed != decoded:
        return 'ParseDict(Heddle ProtoJSON) differs from the decoded bytes'
    (directory / f'{name}.py.bin').write_bytes(parsed.SerializeToString())
    return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory = Path(sys.argv[1])
    failed = 0
    names = sorted(p.stem for p in directory.glob('*.type'))
    for name in names:
        try:
            why = check_one(directory, name)
        except Exception as e:  # noqa: BLE001
            why = f'{type(e).__name__}: {e}'
        if why:
            failed += 1
            print(f'FAIL wire {name}: {why}', flush=True)
        else:
            print(f'PASS wire {name}', flush=True)
    print(f'wire: {len(names) - failed} passed, {failed} failed')
    return 1 if failed or not names else 0


if __name__ == '__main__':
    sys.exit(main())
