"""Rewrite the test fixtures: `fixtures/demo/` (a small 5.x store), `fixtures/demo.broker.conf`, `fixtures/README.md`,
`fixtures/crash/` (a store left by kill -9), `fixtures/crash.broker.conf`, `fixtures/crash.md`, and the
production layouts `fixtures/{dledger,batchcq,pop,compaction}/` with their `.broker.conf` and `fixtures/layouts.md`,
and `fixtures/fleet/` (two broker groups with their slaves, docs/fleet.md).

Usage: `python scripts/make_fixtures.py [--out DIR]` (default: the repository's `fixtures/`).
Deterministic: the same bytes on every run (see `mqtool/builder/demo.py`, `crash.py`,
`layout_fixtures.py`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing the package
    sys.path.insert(0, str(REPO))

from mqtool.builder.crash import write_crash_fixture  # noqa: E402
from mqtool.builder.demo import write_fixtures  # noqa: E402
from mqtool.builder.fleet_fixture import write_fleet_fixture  # noqa: E402
from mqtool.builder.layout_fixtures import write_layout_fixtures  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "fixtures", help="fixtures directory to (re)write")
    args = parser.parse_args(argv)
    entries = write_fixtures(args.out)
    print(f"wrote {args.out / 'demo'}: {len(entries)} records")
    crash = write_crash_fixture(args.out)
    print(f"wrote {args.out / 'crash'}: {len(crash)} labelled records")
    for name, records in write_layout_fixtures(args.out).items():
        print(f"wrote {args.out / name}: {len(records)} records")
    for group, n in write_fleet_fixture(args.out).items():
        print(f"wrote {args.out / 'fleet' / group}: master with {n} records and its slave")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
