"""`mqtool trace`: the whole life of one message across every system topic (issue #9).

| module | what |
|---|---|
| `model` | `TraceQuery`, `Stage`, `Verdict`, `Trace` (the `--json` document) |
| `find` | the joins (UNIQ_KEY, TIMER_DEL_UNIQKEY, ORIGIN_MESSAGE_ID, ...) and the index-free `ScanFinder` |
| `timeline` | records -> stages -> verdict |
| `index` | the optional SQLite lookup index (`mqtool index build`) |
| `future` | `--until`: the simulator continues the timeline |
| `core` | `trace(store, query)` |
| `fleet` | `trace_fleet(fleet, query)`: every store of a fleet, UNIQ_KEYs on two broker groups |

Pure logic: functions take a `Store` and return records; nothing prints or reads the wall clock.
"""

from mqtool.trace.core import trace
from mqtool.trace.model import Stage, Trace, TraceError, TraceQuery, Verdict

__all__ = ["Stage", "Trace", "TraceError", "TraceQuery", "Verdict", "trace"]
