"""Issue #27, one answer per question: what trace, the simulator and the views each say about every
message parked in the delay, timer, transaction and retry topics of one store.

`StoreAnswers.of(name, store)` runs the simulator once (from the store's own now to a few hours past it),
the views once, and trace once per message; `disagreements()` lists, per kind of message, every place
where two of them do not give the same answer (state and due time). Answers are normalised to:

- `done`: trace says delivered, committed, rolled back, discarded, dead-lettered or skipped; the simulator
  does nothing more with it (unless the restart view names it a duplicate: then it goes out again); the
  delay view has it behind the level's restart offset, the timer view in a read slot, the transactions
  view not pending;
- `pending` with a due time: trace says waiting, overdue or pending transaction; the simulator delivers
  it at the due time (a transaction: checks or discards it then), or it still waits at the horizon; the
  delay view has it from the restart offset on (due: the head's), the timer view pending in an unread
  slot (due: its TIMER_OUT_MS), the transactions view pending (due: next check, else discard);
- `never`: trace says never; the simulator does nothing; the delay view's level is not configured;
- `cancelled`: trace says cancelled; the simulator never delivers it; the timer view's unit is cancelled;
- `cancel_request`: a cancel record; never delivered itself; the timer view's unit is a cancel request.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from mqtool.formats import names
from mqtool.formats.message import MessageRecord
from mqtool.inspect.delay import delay_view
from mqtool.inspect.restart import restart_preview
from mqtool.inspect.retry import retry_view
from mqtool.inspect.timer import slot_chain, timer_view
from mqtool.inspect.transactions import transactions_view
from mqtool.rules.schedule import queue_id_2_delay_level
from mqtool.simulate import simulate
from mqtool.simulate.scenario import AnswerRule, Scenario
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace
from mqtool.trace.find import ScanFinder

try:  # the timer view's slots once recovery has revised them (the timer branch of issue #27)
    from mqtool.inspect.timer import view_slots
except ImportError:  # pragma: no cover - before that branch: the wheel file's slots
    view_slots = None


HOUR = 3_600_000
HORIZON_MS = 3 * HOUR  # the simulator runs from the store's own now to now + 3 h
SLACK_MS = 2_000  # a due message goes out within one poll (schedule: 100 ms) or dequeue round (timer: 1 s)
KINDS = ("delay", "timer", "transaction", "retry")

_TRACE_STATE = {
    "delivered": "done",
    "committed": "done",
    "rolled_back": "done",
    "discarded": "done",
    "dead_lettered": "done",
    "consumed": "done",
    "skipped": "done",
    "waiting": "pending",
    "overdue": "pending",
    "pending": "pending",
    "never": "never",
    "cancelled": "cancelled",
    "cancel_request": "cancel_request",
    "unknown": "unknown",
}
_TERMINAL = ("deliver", "cancel", "discard", "skip", "rollback", "commit")


@dataclass
class Answer:
    """One source's answer about one message: a normalised state, a due time when it gives one, and why."""

    state: str
    due: int | None = None
    text: str = ""
    raw: str | None = None  # the source's own word for the state (trace: its verdict state)

    def __str__(self) -> str:
        return (
            f"{self.state}"
            + (f" due {self.due}" if self.due is not None else "")
            + (f" ({self.text})" if self.text else "")
        )


@dataclass
class Message:
    key: str  # UNIQ_KEY, or @offset for a record without one
    kind: str  # delay | timer | transaction | retry
    rec: MessageRecord  # its first record in a parking topic
    records: list[MessageRecord] = field(default_factory=list)  # every record of it in the parking topics
    trace: Answer | None = None
    view: Answer | None = None
    events: list = field(default_factory=list)  # the simulator's events of it, in order

    @property
    def label(self) -> str:
        keys = " ".join(self.rec.keys)
        return f"{self.kind} {self.key}" + (f" [{keys}]" if keys else "") + f" @{self.rec.physical_offset}"


def _kind(rec: MessageRecord) -> str | None:
    t = rec.topic
    if t == names.RMQ_SYS_SCHEDULE_TOPIC:
        real = rec.properties.get(names.PROPERTY_REAL_TOPIC) or ""
        return "retry" if real.startswith(names.RETRY_GROUP_TOPIC_PREFIX) else "delay"
    if t == names.TIMER_TOPIC:
        return "timer"
    if t == names.RMQ_SYS_TRANS_HALF_TOPIC:
        return "transaction"
    if t.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    return None


def parked_messages(store: Store) -> dict[str, Message]:
    """Every message with a record in a parking topic (schedule, timer, half, %RETRY%), by UNIQ_KEY."""
    out: dict[str, Message] = {}
    for rec in store.commitlog.iter_records(None, verify_crc=False):
        kind = _kind(rec)
        if kind is None:
            continue
        key = (rec.uniq_key or f"@{rec.physical_offset}").upper()
        msg = out.setdefault(key, Message(key, kind, rec))
        msg.records.append(rec)
    return out


@dataclass
class StoreAnswers:
    """Everything said about one store's parked messages, computed once."""

    name: str
    store: Store
    now: int
    until: int
    messages: dict[str, Message]
    sim: object
    views: dict
    trace_as_of: set[int]
    stray_events: list
    broker_version: str = "5.3"

    @classmethod
    def of(cls, name: str, store: Store, broker_version: str = "5.3") -> StoreAnswers:
        now = store.last_activity_ms()
        until = now + HORIZON_MS
        messages = parked_messages(store)
        views = {
            "delay": delay_view(store, now),
            "timer": timer_view(store, now),
            "transactions": transactions_view(store, now, v4=broker_version.startswith("4")),
            "retry": retry_view(store, now),
            "restart": restart_preview(store, at_ms=now, replay=False, broker_version=broker_version),
        }
        me = cls(name, store, now, until, messages, None, views, set(), [], broker_version)
        me._trace_all()
        me.sim = simulate(store, store.config, now, until, Scenario(answers=me._answers()), 0, broker_version)
        me._events(me.sim.events)
        units = me._timer_units()
        for m in messages.values():
            m.view = me._view_answer(m, units)
        return me

    # ------------------------------------------------------------------ trace

    def _trace_all(self) -> None:
        finder = ScanFinder(self.store)
        for m in self.messages.values():
            traces = trace(self.store, TraceQuery(offset=m.rec.physical_offset), finder=finder,
                           broker_version=self.broker_version)
            assert len(traces) == 1, f"{self.name}: trace of {m.label} found {len(traces)} messages"
            t = traces[0]
            self.trace_as_of.add(t.as_of)
            v = t.verdict
            m.trace = Answer(_TRACE_STATE.get(v.state, v.state), v.due, v.text, v.state)

    def _answers(self) -> list[AnswerRule]:
        """A producer that committed (rolled back) answers a check with COMMIT (ROLLBACK) again, as the
        restart view's replay assumes; pending transactions get no answer."""
        ends = {"committed": "commit", "rolled_back": "rollback"}
        return [
            AnswerRule(ends[m.trace.raw], uniq_key=m.rec.uniq_key)
            for m in self.messages.values()
            if m.kind == "transaction" and m.trace.raw in ends and m.rec.uniq_key
        ]

    # ------------------------------------------------------------------ simulator

    def _events(self, events) -> None:
        by_offset: dict[int, Message] = {}
        for m in self.messages.values():
            for r in m.records:
                by_offset[r.physical_offset] = m
        for ev in events:
            if ev.event == "persist":
                continue
            m = self.messages.get((ev.uniq_key or "").upper()) or by_offset.get(ev.physical_offset)
            if m is None:
                self.stray_events.append(ev)
                continue
            m.events.append(ev)
            if ev.new_physical_offset is not None:
                by_offset[ev.new_physical_offset] = m

    @staticmethod
    def terminal(m: Message):
        """The message's first terminal event in the run (deliver, cancel, discard, ...), or None."""
        return next((e for e in m.events if e.event in _TERMINAL), None)

    # ------------------------------------------------------------------ views

    def _timer_units(self) -> dict[int, list[dict]]:
        """offset_py -> the units of the wheel's slots (the timer view's chains), each with its state."""
        out: dict[int, list[dict]] = defaultdict(list)
        tv = self.views["timer"]
        read = tv["checkpoint"]["last_read_time_ms"] if tv["checkpoint"] else None
        extra = () if view_slots is None else (view_slots(tv),)  # the wheel as the view holds it (recovered)
        for slot in tv["slots"]:
            for u in slot_chain(self.store, slot["time_ms"], None, read, *extra)["units"]:
                out[u["offset_py"]].append(u)
        return out

    def _view_answer(self, m: Message, units: dict[int, list[dict]]) -> Answer:
        if m.rec.topic == names.RMQ_SYS_SCHEDULE_TOPIC:
            return self._delay_answer(m)
        if m.kind == "timer":
            return self._timer_answer(m, units)
        if m.kind == "transaction":
            return self._tx_answer(m)
        return Answer("done", text="a %RETRY% record: delivered")

    def _delay_answer(self, m: Message) -> Answer:
        level = queue_id_2_delay_level(m.rec.queue_id)
        row = next(r for r in self.views["delay"]["levels"] if r["level"] == level)
        q = m.rec.queue_offset
        if q < row["corrected_offset"]:
            return Answer("done", text=f"delay view: level {level} restarts from {row['corrected_offset']}")
        if not row["configured"]:
            ans = Answer("never", text=f"delay view: level {level} not configured")
            return self._retry_answer(m, ans) if m.kind == "retry" else ans
        due = row["head_deliver_timestamp"] if q == row["corrected_offset"] else None
        ans = Answer("pending", due, f"delay view: level {level}" + (" head" if due is not None else ""))
        if m.kind == "retry":  # the retry view must say the same of a send-back
            ans = self._retry_answer(m, ans)
        return ans

    def _retry_answer(self, m: Message, delay: Answer) -> Answer:
        group = m.rec.properties[names.PROPERTY_REAL_TOPIC][len(names.RETRY_GROUP_TOPIC_PREFIX) :]
        level = queue_id_2_delay_level(m.rec.queue_id)
        g = next((g for g in self.views["retry"]["groups"] if g["group"] == group), None)
        row = None if g is None else next((r for r in g["backlog"]["levels"] if r["level"] == level), None)
        if row is None:
            return Answer("absent", text=f"retry view: no backlog of {group} at level {level}")
        if delay.state == "never":
            if row["next_due_ms"] is not None or row["overdue_ms"] is not None:
                return Answer(
                    "pending",
                    row["next_due_ms"],
                    f"retry view: {group} level {level} (not configured) "
                    f"next due {row['next_due_ms']}, overdue {row['overdue_ms']}",
                )
            return delay
        due = row["next_due_ms"] if row["head"]["physical_offset"] == m.rec.physical_offset else None
        if delay.due is not None and due != delay.due:
            return Answer("pending", due, f"retry view head due {due}, delay view head due {delay.due}")
        return Answer("pending", due if due is not None else delay.due, f"retry view: {group} level {level}")

    def _timer_answer(self, m: Message, units: dict[int, list[dict]]) -> Answer:
        mine = sorted(
            (
                u
                for r in m.records
                if r.topic == names.TIMER_TOPIC
                for u in units.get(r.physical_offset, [])
                if u["kind"] != "delete" or u["state"] == "cancel request"
            ),
            key=lambda u: u["pos"],
        )
        if not mine:
            cp = self.views["timer"]["checkpoint"]
            last = max(r.queue_offset for r in m.records if r.topic == names.TIMER_TOPIC)
            if cp is not None and last >= cp["last_timer_queue_offset"]:
                return Answer("pending", text="timer view: not enqueued yet (enqueue_behind)")
            return Answer("absent", text="timer view: in no slot of the wheel")
        u = mine[-1]
        state = {
            "pending": "pending",
            "rolls on": "pending",
            "delivered": "done",
            "cancelled": "cancelled",
            "cancel request": "cancel_request",
        }.get(u["state"], u["state"])
        due = u["timer_out_ms"] if state == "pending" else None
        return Answer(state, due, f"timer view: unit @{u['pos']} in slot {u['delayed_time_ms']}: {u['state']}")

    def _tx_answer(self, m: Message) -> Answer:
        row = next(
            (
                r
                for r in self.views["transactions"]["half_messages"]
                if (r["uniq_key"] or "").upper() == m.key or r["physical_offset"] == m.rec.physical_offset
            ),
            None,
        )
        if row is None:
            return Answer("absent", text="transactions view: no row")
        if row["state"] != "pending":
            return Answer("done", text=f"transactions view: {row['state']}")
        pred = row["prediction"] or {}
        due = pred.get("next_check_ms") if pred.get("next_check_ms") is not None else pred.get("discard_ms")
        return Answer(
            "pending",
            due,
            f"transactions view: next check {pred.get('next_check_ms')}, discard {pred.get('discard_ms')}",
        )

    # ------------------------------------------------------------------ the comparison

    def disagreements(self, kind: str) -> list[str]:
        """Every disagreement about the messages of one kind, one line each (empty: one answer)."""
        out = []
        for m in self.messages.values():
            if m.kind == kind:
                out += [f"{m.label}: {p}" for p in self._problems(m)]
        return out

    def _problems(self, m: Message) -> list[str]:
        t, v = m.trace, m.view
        delivered = [e for e in m.events if e.event == "deliver"]
        out = []
        said = f"trace {t}; view {v}; simulator {self._sim_text(m)}"
        dup = self._restart_duplicate(m)
        if t.state == "done":
            if delivered and not dup:
                out.append(f"delivered again by the simulator, not a restart duplicate: {said}")
            if dup and not delivered:
                out.append(f"a restart duplicate the simulator does not deliver again: {said}")
            if v.state not in ("done",) and not (dup and v.state == "pending"):
                out.append(f"views disagree with trace: {said}")
            return out
        if t.state != v.state:
            out.append(f"views disagree with trace: {said}")
        if t.state in ("never", "cancel_request"):
            if delivered:
                out.append(f"the simulator delivers it: {said}")
            return out
        if t.state == "cancelled":
            if delivered:
                out.append(f"the simulator delivers a cancelled message: {said}")
            return out
        if t.state != "pending":
            out.append(f"no answer from trace: {said}")
            return out
        if t.due is None:
            out.append(f"trace gives no due time for a pending message: {said}")
            return out
        if v.due is not None and v.due != t.due:
            out.append(f"due times differ (trace {t.due}, view {v.due}): {said}")
        out += self._sim_vs_due(m, t.due, said)
        return out

    def _sim_vs_due(self, m: Message, due: int, said: str) -> list[str]:
        if m.kind == "transaction":  # the check request (or the discard) goes out at the predicted time
            ev = next((e for e in m.events if e.event in ("check", *_TERMINAL)), None)
            if due < self.until and (ev is None or ev.time != due):
                return [f"the simulator's first check or end is not at trace's due {due}: {said}"]
            return []
        ev = self.terminal(m)
        earliest = max(due, self.now)
        if ev is None:
            if earliest + SLACK_MS < self.until:
                return [f"due {due} within the horizon, but the simulator does nothing: {said}"]
            return []
        if ev.event != "deliver":
            return [f"the simulator ends it otherwise: {said}"]
        problems = []
        if ev.detail.get("due") is not None and ev.detail["due"] != due:
            problems.append(f"the simulator delivers it for due {ev.detail['due']}, trace says {due}: {said}")
        if not earliest <= ev.time <= earliest + SLACK_MS:
            problems.append(f"the simulator delivers it at {ev.time}, not within {SLACK_MS} ms of {earliest}: {said}")
        return problems

    def _restart_late(self) -> list[str]:
        """The restart view's late levels against the delay view (how overdue the head is) and the simulator
        (when the level's first message goes out); its wheel against the waiting timer messages."""
        out = []
        rows = {r["level"]: r for r in self.views["delay"]["levels"]}
        firsts: dict[int, int] = {}
        for m in self.messages.values():
            for e in m.events:
                if e.service == "schedule" and e.event == "deliver":
                    firsts[e.detail["level"]] = min(e.time, firsts.get(e.detail["level"], e.time))
        late = self.views["restart"]["late"]
        for lv in late["delay_levels"]:
            level, dv = lv["level"], rows.get(lv["level"])
            dv_overdue = max(0, dv["overdue_ms"] or 0) if dv else None
            if lv["configured"] and lv["overdue_by_ms"] != dv_overdue:
                out.append(
                    f"restart view: level {level} overdue by {lv['overdue_by_ms']} ms ({lv['overdue']} late), "
                    f"delay view: {dv_overdue} ms"
                )
            first = firsts.get(level)
            if lv["goes_out_ms"] != first and (first is not None or (lv["goes_out_ms"] or 0) < self.until):
                out.append(
                    f"restart view: level {level} goes out at {lv['goes_out_ms']}, the simulator's first "
                    f"delivery of it is at {first}"
                )
        wheel = late["timer"]
        if wheel.get("present"):
            cp = self.views["timer"]["checkpoint"] or {}
            waiting = [
                m.trace.due
                for m in self.messages.values()
                if m.kind == "timer"
                and m.trace.state == "pending"
                and max(r.queue_offset for r in m.records) < cp.get("last_timer_queue_offset", 0)
            ]
            if (wheel["pending"], wheel["earliest_ms"]) != (len(waiting), min(waiting, default=None)):
                out.append(
                    f"restart view: wheel pending {wheel['pending']} from {wheel['earliest_ms']}; trace: "
                    f"{len(waiting)} waiting from {min(waiting, default=None)}"
                )
        return out

    def _restart_times(self) -> list[str]:
        """Each message the restart view says goes out again (duplicates) or is checked again (rechecks)
        does so in the simulator at the time the view gives."""
        out = []
        rv = self.views["restart"]
        for d in rv["duplicates"] + rv["rechecks"]:
            m = self.messages.get((d["uniq_key"] or "").upper())
            if m is None:
                out.append(f"restart view: {d['kind']} {d['uniq_key']} is of no parked message")
                continue
            want = ("check",) if d["kind"] == "transaction" else ("deliver",)
            ev = next((e for e in m.events if e.event in want), None)
            slack = 0 if d["kind"] == "transaction" else SLACK_MS
            ok = ev is not None and d["again_at_ms"] <= ev.time <= d["again_at_ms"] + slack
            if not ok:
                out.append(
                    f"restart view: {m.label} {want[0]} again at {d['again_at_ms']}; simulator {self._sim_text(m)}"
                )
        return out

    def _restart_duplicate(self, m: Message) -> bool:
        return any((d["uniq_key"] or "").upper() == m.key for d in self.views["restart"]["duplicates"])

    @staticmethod
    def _sim_text(m: Message) -> str:
        evs = [
            f"{e.service} {e.event} at {e.time}" + (f" due {e.detail['due']}" if e.detail.get("due") else "")
            for e in m.events
        ]
        return "[" + ", ".join(evs) + "]" if evs else "nothing"

    # ------------------------------------------------------------------ store-wide answers

    def store_disagreements(self) -> list[str]:
        """Answers about the whole store: one now, no simulator event for an unknown message, and the counts
        the views show against the per-message answers."""
        out = []
        if self.trace_as_of - {self.now}:
            out.append(f"trace's now {sorted(self.trace_as_of)} is not the simulator's start {self.now}")
        for ev in self.stray_events:
            if ev.event in _TERMINAL or ev.event == "check":
                out.append(
                    f"the simulator's {ev.service} {ev.event} at {ev.time} is of no parked message "
                    f"({ev.uniq_key}, @{ev.physical_offset})"
                )
        tv = self.views["timer"]
        if tv["wheel"]["present"]:
            cp = tv["checkpoint"] or {}
            enqueued = cp.get("last_timer_queue_offset", 0)
            timers = [m for m in self.messages.values() if m.kind == "timer"]
            in_wheel = [
                m.label
                for m in timers
                if m.trace.state == "pending"
                and max(r.queue_offset for r in m.records) < enqueued
                or m.trace.state == "done"
                and self._restart_duplicate(m)
            ]
            if tv["pending"]["count"] != len(in_wheel):
                out.append(
                    f"timer view: {tv['pending']['count']} pending; trace and restart: {len(in_wheel)} enqueued and "
                    f"waiting, or delivered again ({', '.join(in_wheel)})"
                )
        out += self._restart_times()
        out += self._restart_late()
        never = sum(1 for m in self.messages.values() if m.trace.state == "never")
        late = self.views["restart"]["late"]
        if late["never_delivered"] != never:
            out.append(f"restart view: {late['never_delivered']} never delivered, trace: {never}")
        dv_never = self.views["delay"]["totals"]["never_delivered"]
        if dv_never != never:
            out.append(f"delay view: {dv_never} never delivered, trace: {never}")
        return out
