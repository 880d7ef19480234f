"""`trace --until T`: continue a message's timeline into the future with the simulator.

`mqtool.simulate.simulate` replays the schedule, timer and transaction-check services from the
store's own "now" (its newest store timestamp, as `mqtool simulate` does) up to `until_ms`; the
events of this message (same UNIQ_KEY, or a record of its family, or a record a matched event
wrote) become `simulated` stages, and the last decisive one replaces the verdict.
"""

from __future__ import annotations

from mqtool.store.store import Store
from mqtool.times import format_time
from mqtool.trace.model import Stage, Trace, TraceError, Verdict

# simulator event -> stage name
_STAGE = {
    "deliver": "delivered", "enqueue": "parked", "roll": "rolled", "cancel": "cancelled", "check": "put_back",
    "put_back": "put_back", "commit": "committed", "rollback": "rolled_back", "discard": "discarded",
    "skip": "discarded", "put_failed": "skipped",
}
_TERMINAL = {"deliver": "delivered", "cancel": "cancelled", "rollback": "rolled_back", "discard": "discarded",
             "skip": "discarded"}


def _detail(ev) -> str:
    d = ev.detail
    if ev.event == "deliver":
        return f"{ev.service} service delivers it" + (f" (due {format_time(d['due'])})" if d.get("due") else "")
    if ev.event == "enqueue":
        return f"timer enqueue into slot {format_time(d.get('slot'))}" + (" (roll window)" if d.get("roll") else "")
    if ev.event == "roll":
        return f"roll #{d.get('roll_times')} at slot {format_time(d.get('slot'))}"
    if ev.event == "cancel":
        return f"dropped by a cancel at slot {format_time(d.get('slot'))}"
    if ev.event == "check":
        return (f"check request to producer group {d.get('producer_group')} (TRANSACTION_CHECK_TIMES="
                f"{d.get('check_times')}), answer: {d.get('answer')}")
    if ev.event == "put_back":
        return f"{d.get('reason', 'check')} put-back (TRANSACTION_CHECK_TIMES={d.get('check_times')})"
    if ev.event == "put_failed":
        return f"put failed ({d.get('status') or d.get('reason')})" + (f", {d['next']}" if d.get("next") else "")
    return ", ".join(f"{k}={v}" for k, v in d.items())


def continue_trace(store: Store, tr: Trace, until_ms: int, broker_version: str = "5.3", seed: int = 0) -> Trace:
    """The trace with the simulated stages up to `until_ms` appended and the verdict updated."""
    from mqtool.simulate.runner import default_start, simulate

    start_ms = default_start(store)
    if until_ms <= start_ms:
        raise TraceError(f"--until ({format_time(until_ms)}) must be after the simulator's start "
                         f"({format_time(start_ms)}, the store's last sign of life)")
    result = simulate(store, store.config, start_ms, until_ms, seed=seed, broker_version=broker_version)
    keys = {k.upper() for k in tr.uniq_keys}
    offsets = {r.record.physical_offset for r in tr.records}
    last = None
    for ev in result.events:
        mine = (ev.uniq_key is not None and ev.uniq_key.upper() in keys) or ev.physical_offset in offsets
        if not mine or ev.event not in _STAGE:
            continue
        if ev.new_physical_offset is not None:
            offsets.add(ev.new_physical_offset)
        phys = ev.new_physical_offset if ev.new_physical_offset is not None else ev.physical_offset
        tr.stages.append(Stage(ev.time, _STAGE[ev.event], ev.topic, ev.queue_id, ev.detail.get("queue_offset"),
                               phys, _detail(ev), simulated=True))
        if ev.event in _TERMINAL or ev.event == "commit":
            last = ev
    tr.until = until_ms
    if last is not None:
        when = format_time(last.time)
        if last.event == "deliver":
            where = f"{last.topic}/{last.queue_id}@{last.detail.get('queue_offset')}"
            state = "committed" if tr.verdict.state == "pending" and last.service == "transaction" else "delivered"
            tr.verdict = Verdict(state, f"{'committed' if state == 'committed' else 'delivered'} {when} to "
                                 f"{where} (simulated)")
        elif last.event == "commit":
            tr.verdict = Verdict("committed", f"committed {when} (simulated)")
        else:
            text = {"cancelled": f"cancelled {when} (simulated)", "rolled_back": f"rolled back {when} (simulated)",
                    "discarded": f"discarded {when} after {last.detail.get('check_times')} checks (simulated)"}
            tr.verdict = Verdict(_TERMINAL[last.event], text[_TERMINAL[last.event]])
    else:
        tr.verdict = Verdict(tr.verdict.state, f"{tr.verdict.text}; still so at {format_time(until_ms)} (simulated)",
                             tr.verdict.due)
    return tr
