"""A POP message's pops, acks, revives and DLQ as trace stages, in the store real RocketMQ 5.3.1 left
(../shared/oracle/pop-revive-5.3.1/B: the times are its B.manifest.json's popTime values and record times)."""

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace

pytestmark = pytest.mark.oracle
PT1, PT2, PT3 = 1795771507451, 1795771515514, 1795771523588  # the three pop requests' popTime


@pytest.fixture(scope="module")
def store() -> Store:
    need_oracle()
    pair = ORACLE / "pop-revive-5.3.1"
    return Store.open(pair / "B", load_broker_conf(pair / "broker.conf"))


def stages(store: Store, key: str) -> list[tuple[str, int | None, str]]:
    (t,) = trace(store, TraceQuery(key=key))
    return [(s.stage, s.time, s.topic) for s in t.stages if s.stage != "born"], t.verdict


def test_never_acked_message_is_popped_three_times_and_dead_lettered(store):
    got, verdict = stages(store, "P2")
    retry = "%RETRY%GID_p_TopicP"
    assert [(s, t) for s, t, _ in got] == [
        ("stored", 1795771332508),
        ("popped", PT1),
        ("revived", 1795771515485),
        ("popped", PT2),
        ("revived", 1795771523562),
        ("popped", PT3),
        ("acked", 1795771523606),
        ("dead_lettered", 1795771523603),
    ]
    assert [topic for _s, _t, topic in got] == ["TopicP", "TopicP", retry, retry, retry, retry, retry, "%DLQ%GID_p"]
    assert verdict.state == "dead_lettered"


def test_acked_message_is_not_revived(store):
    got, _ = stages(store, "P1")
    assert [(s, t) for s, t, _ in got] == [("stored", 1795771332446), ("popped", PT1), ("acked", 1795771507534)]
    # P3: not acked at its first pop, acked at the second
    got, _ = stages(store, "P3")
    assert [s for s, _t, _ in got] == ["stored", "popped", "revived", "popped", "acked"]


def test_popped_and_not_yet_revived_in_a_simulated_store(tmp_path_factory):
    # tests/popkit.py at S + 40 s: GID_ok popped and acked every message at S, GID_bad popped them (invisible
    # until S + 60 s); the ack records still wait in the timer (born at S)
    from popkit import S, pop_store

    st, _r = pop_store(tmp_path_factory, S + 40_000)
    (t,) = trace(st, TraceQuery(offset=0))  # DemoTopicA/0@0
    got = sorted((s.stage, s.time, s.detail.split(":")[0]) for s in t.stages if s.stage not in ("born", "stored"))
    # GID_demo is a push group with a committed offset: its line stays
    assert got == [
        ("acked", S, "acked by consumer group GID_ok"),
        ("consumed", None, "consumer group GID_demo"),
        ("not_consumed", S + 60_000, "consumer group GID_bad"),
        ("popped", S, "popped by consumer group GID_bad, invisible until 2026-09-21T14"),
        ("popped", S, "popped by consumer group GID_ok, invisible until 2026-09-21T14"),
    ]
