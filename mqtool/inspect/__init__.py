"""`mqtool inspect`: what an operator asks of a store, answered by pure functions.

Each module takes an open `Store` (and options) and returns plain records: dicts shaped like the
`--json` documents (`{"version": 1, "view": ...}`) or, for record streams, one dict per record.
Nothing here prints, reads the wall clock or writes: `now_ms` is always passed in.

| module | view |
|---|---|
| `overview` | layout, offset/time ranges, counts per topic and queue, headline numbers, findings |
| `messages` | CommitLog records with filters; one record by physical offset |
| `queue` | ConsumeQueue units resolved against the CommitLog |
| `delay` | delay levels (`ScheduleMessageService`, spec §4) |
| `timer` | timer cursors, TimerLog, TimerWheel (spec §6) |
| `transactions` | half messages and their states (spec §7) |
| `consumers` | per consumer group, topic and queue: committed / max offset, lag, oldest unconsumed (spec §5) |
| `dump` | a single store file, dispatched on its kind (Kafka's `DumpLogSegments`) |
"""

JSON_VERSION = 1


def load_schema(name: str) -> dict:
    """The JSON Schema of an output, e.g. `load_schema("delay")` for `mqtool/schemas/inspect-delay.json`."""
    import json
    from importlib.resources import files

    return json.loads(files("mqtool").joinpath("schemas", f"inspect-{name}.json").read_text("utf-8"))
