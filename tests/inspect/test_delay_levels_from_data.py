"""Without a broker.conf, the store's own units say which delay levels the broker had (issue #27).

A SCHEDULE_TOPIC_XXXX unit's tagsCode is the record's store time + its level's delay as the broker had
it (`CommitLog.checkMessageAndReturnSize` -> `computeDeliverTimestamp`), so tagsCode - store time is
that delay. A broker run with `messageDelayLevel=1s 3s 7s` writes level 2 units 3 s and level 3
units 7 s after their store time; opened with the defaults (5 s, 10 s) every view would be wrong.
"""

from dataclasses import replace

import pytest

from conftest import ORACLE, need_oracle
from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import DEFAULT_MESSAGE_DELAY_LEVEL, BrokerConfig, load_broker_conf
from mqtool.inspect.delay import delay_view
from mqtool.inspect.restart import restart_preview
from mqtool.simulate import simulate
from mqtool.simulate.prepare import prepare_run
from mqtool.store.delaylevels import config_in_effect
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace

T0 = 1_795_000_000_000
DEFAULTS = BrokerConfig().delay_levels_ms()
SIZES = {"mapped_file_size_commitlog": 1 << 20, "mapped_file_size_consume_queue": 1200}


def _props(key: str, n: int) -> list[tuple[str, str]]:
    return [("UNIQ_KEY", f"7F000001000000000000000000{n:06X}"), ("KEYS", key), ("TAGS", "t")]


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """Levels 1s 3s 7s: D2 (level 2) stored at T0, D3 (level 3) at T0 + 5, D9 (DELAY=9, clamped to 3) at T0 + 6."""
    root = tmp_path_factory.mktemp("levels") / "store"
    conf = replace(BrokerConfig(), message_delay_level="1s 3s 7s", **SIZES)
    with StoreWriter(root, conf) as w:
        b.put_message(w, "TopicA", 0, b"x", _props("plain", 1), store_timestamp=T0 - 10)
        b.put_delay_message(w, "TopicA", 1, b"d", _props("D2", 2), store_timestamp=T0, level=2)
        b.put_delay_message(w, "TopicA", 1, b"d", _props("D3", 3), store_timestamp=T0 + 5, level=3)
        b.put_delay_message(w, "TopicA", 1, b"d", _props("D9", 4), store_timestamp=T0 + 6, level=9)
    return root, conf


def test_the_delay_view_finds_the_levels_and_uses_them_without_a_config(custom):
    root, conf = custom
    doc = delay_view(Store.open(root), T0 + 1000)
    assert doc["delay_levels"] == {"source": "store data", "levels_ms": [1000, 3000, 7000, *DEFAULTS[3:]]}
    lv = {r["level"]: r for r in doc["levels"]}
    assert (lv[2]["delay_ms"], lv[2]["head_deliver_timestamp"], lv[2]["overdue_ms"]) == (3000, T0 + 3000, -2000)
    assert (lv[3]["delay_ms"], lv[3]["backlog"], lv[3]["head_deliver_timestamp"]) == (7000, 2, T0 + 7005)
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.implied"]
    assert "level 2 = 3s (5s in the table); level 3 = 7s (10s in the table)" in f["message"]
    assert "no broker.conf was given: these are used instead of the defaults" in f["message"]
    # with the broker's own broker.conf the data agrees: no finding, the config's table
    doc = delay_view(Store.open(root, conf), T0 + 1000)
    assert doc["delay_levels"] == {"source": "config", "levels_ms": [1000, 3000, 7000]}
    assert not [f for f in doc["findings"] if f["check"] == "delay.implied"]


def test_a_given_config_wins_but_the_finding_says_the_data_differs(custom):
    root, _ = custom
    doc = delay_view(Store.open(root, load_conf_text("messageDelayLevel=" + DEFAULT_MESSAGE_DELAY_LEVEL)), T0)
    assert doc["delay_levels"] == {"source": "config", "levels_ms": DEFAULTS}
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.implied"]
    assert "messageDelayLevel of the broker.conf given is used" in f["message"]


def load_conf_text(text: str) -> BrokerConfig:
    from mqtool.formats.broker_conf import parse_broker_conf

    return parse_broker_conf(text)


def test_trace_restart_and_the_simulator_use_them_too(custom):
    root, _ = custom
    store = Store.open(root)
    (d3,) = trace(store, TraceQuery(key="D3"), as_of=T0 + 1000)
    parked = next(s for s in d3.stages if s.stage == "parked")
    assert parked.detail.startswith("delay level 3 (7s)")
    assert d3.verdict.due == T0 + 7005
    # restart at T0 + 1000: level 2's first task at +2000, D2 due +3000 on the 100 ms grid; level 3 at +7005 -> +7100
    doc = restart_preview(store, None, T0 + 1000, 10_000)
    late = {lv["level"]: lv["goes_out_ms"] for lv in doc["late"]["delay_levels"]}
    assert late == {2: T0 + 3000, 3: T0 + 7100}
    out = {e["uniq_key"]: e["time"] for e in doc["replay"]["first"]["schedule deliver"]}
    assert sorted(out.values()) == [T0 + 3000, T0 + 7100, T0 + 7100]
    assert config_in_effect(store).delay_levels_ms()[:3] == [1000, 3000, 7000]
    run = prepare_run(root, "+20s", start=str(T0 + 1000))
    r = simulate(run.store, run.config, run.start_ms, run.until_ms)
    assert sorted(e.time for e in r.events if e.event == "deliver") == [T0 + 3000, T0 + 7100, T0 + 7100]


def test_a_level_past_the_defaults(tmp_path):
    """20 levels of n seconds, one message at level 20: the defaults (18 levels) call it never delivered;
    the data says level 20 = 20 s, so it is configured; level 19 has no unit: its delay is unknown."""
    conf = replace(BrokerConfig(), message_delay_level=" ".join(f"{n}s" for n in range(1, 21)), **SIZES)
    with StoreWriter(tmp_path, conf) as w:
        b.put_delay_message(w, "TopicA", 0, b"d", _props("D20", 1), store_timestamp=T0, level=20)
    doc = delay_view(Store.open(tmp_path), T0)
    assert doc["delay_levels"]["levels_ms"][17:] == [DEFAULTS[17], DEFAULTS[17], 20_000]
    r20 = next(r for r in doc["levels"] if r["level"] == 20)
    assert (r20["configured"], r20["never_delivered"], r20["head_effective_deliver_timestamp"]) == (
        True,
        0,
        T0 + 20_000,
    )
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.implied"]
    assert "level 20 = 20s (missing in the table)" in f["message"]
    assert "level(s) 19 have no unit: their delay is unknown" in f["message"]


def test_a_real_broker_with_levels_of_n_seconds():
    """retry-dlq-5.3.1 ran with messageDelayLevel=1s 2s 3s ... 18s (its README); B holds retries at levels 3-5."""
    need_oracle()
    root = ORACLE / "retry-dlq-5.3.1" / "B"
    doc = delay_view(Store.open(root), 0)
    assert doc["delay_levels"]["source"] == "store data"
    assert doc["delay_levels"]["levels_ms"][2:5] == [3000, 4000, 5000]
    (f,) = [f for f in doc["findings"] if f["check"] == "delay.implied"]
    assert (
        "level 3 = 3s (10s in the table); level 4 = 4s (30s in the table); level 5 = 5s (1m in the table)"
        in (f["message"])
    )
    doc = delay_view(Store.open(root, load_broker_conf(ORACLE / "retry-dlq-5.3.1" / "broker.conf")), 0)
    assert doc["delay_levels"]["source"] == "config"
    assert not [f for f in doc["findings"] if f["check"] == "delay.implied"]


def test_the_audit_checks_the_units_against_the_levels_they_imply():
    """Without --config the audit called every retry unit of retry-dlq-5.3.1/B an error (tagsCode != store time +
    the default 10 s); it now checks them against the levels the units imply and says so once."""
    need_oracle()
    from mqtool.audit.runner import run_local

    rep = run_local(ORACLE / "retry-dlq-5.3.1" / "B")
    mine = [(f["severity"], f["check"]) for f in rep["findings"] if f["check"] in ("schedule", "delay.implied")]
    assert mine == [("warning", "delay.implied")]
