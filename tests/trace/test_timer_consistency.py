"""Issue #27: one answer per timer message, on every fixture and oracle store that holds timers.

For each message whose unit waits in a slot not yet read, `inspect timer`'s chain state (pending,
rolls on, cancelled), `trace`'s verdict and the replay (`simulate` past the last due time) must say the
same thing: delivered (pending now) or cancelled.
"""

import pytest

from conftest import FIXTURES, ORACLE
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf
from mqtool.inspect.timer import slot_chain, timer_view, view_cancels, view_slots
from mqtool.simulate.runner import default_start, simulate
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace

_BASIC = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 1280, "mappedFileSizeTimerLog": 65536}
STORES = {
    "fixtures/demo": (FIXTURES / "demo", lambda: load_broker_conf(FIXTURES / "demo.broker.conf")),
    "basic-5.3.1": (ORACLE / "basic-5.3.1/store", lambda: BrokerConfig().with_overrides(_BASIC)),
    "pair_default/A": (ORACLE / "pair_default/A", lambda: load_broker_conf(ORACLE / "pair_default/broker.conf")),
    "pair_default/B": (ORACLE / "pair_default/B", lambda: load_broker_conf(ORACLE / "pair_default/broker.conf")),
}
_VIEW = {"pending": "delivered", "rolls on": "delivered", "cancelled": "cancelled"}
_TRACE = {"waiting": "delivered", "overdue": "delivered", "cancelled": "cancelled"}


def _view_answers(store: Store) -> tuple[dict[str, str], int]:
    """UNIQ_KEY -> what `inspect timer` says of each message in a slot not yet read; and the last due time."""
    doc = timer_view(store, store.last_activity_ms())
    slots, cancels, read = view_slots(doc), view_cancels(store, doc), doc["checkpoint"]["last_read_time_ms"]
    out, last = {}, 0
    for t in sorted(slots):
        if t < read:
            continue
        for u in slot_chain(store, t, read_time=read, slots=slots, later=cancels)["units"]:
            if u["state"] in _VIEW:
                out[u["uniq_key"]] = _VIEW[u["state"]]
                last = max(last, u["timer_out_ms"] or t)
    return out, last


@pytest.mark.parametrize("name", sorted(STORES))
def test_view_trace_and_replay_agree(name):
    path, config = STORES[name]
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    cfg = config()
    store = Store.open(path, cfg)
    view, last = _view_answers(store)
    assert view, "the store holds timers waiting in the wheel"
    start = default_start(store)
    result = simulate(store, cfg, start, max(start, last) + 3 * cfg.timer_precision_ms, hold_events=True)
    outcome = {"deliver": "delivered", "cancel": "cancelled"}
    replay = {
        e.uniq_key: outcome[e.event]
        for e in result.events
        if e.service == "timer" and e.event in outcome and e.uniq_key in view
    }
    traced = {k: _TRACE.get(trace(store, TraceQuery(uniq_key=k))[0].verdict.state) for k in view}
    assert replay == view
    assert traced == view
