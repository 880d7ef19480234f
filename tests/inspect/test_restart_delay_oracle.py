"""The restart view's delay levels against a real 5.3.1 restart (pair_default: A restarted into B).

pair_default/README.md: B's services started at T_servicesStartedMs; ScheduleMessageService delivered
the overdue D1a, D1b, D2 about 1 s later (FIRST_DELAY_TIME), D3a/D3b, D5, D6 at their due times,
and kept D18/D99 (level 18) pending. The restart preview at that start must name those times
within one 100 ms poll (`first_delivery_after_start` leaves out the tasks' own run time, which moves
the real broker's poll grid by a few ms per poll), and agree with the delay view at the same moment.
"""

import json

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect.delay import delay_view
from mqtool.inspect.restart import restart_preview
from mqtool.store.store import Store

PAIR = ORACLE / "pair_default"
POLL = 100  # DELAY_FOR_A_WHILE


@pytest.fixture(scope="module")
def pair():
    need_oracle()
    manifest = json.loads((PAIR / "B.manifest.json").read_text())
    store = Store.open(PAIR / "A", load_broker_conf(PAIR / "broker.conf"))
    return store, manifest


def _b_deliveries(manifest: dict) -> dict[int, list[int]]:
    """Level -> store times of B's re-puts of delay messages (records after A's end with DELAY, not parked)."""
    out: dict[int, list[int]] = {}
    for line in (PAIR / "B.commitlog.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("blank") or r["offset"] < manifest["aCommitLogEndOffset"] or r["topic"] == "SCHEDULE_TOPIC_XXXX":
            continue
        if "DELAY" in r["properties"]:
            out.setdefault(int(r["properties"]["DELAY"]), []).append(r["storeTimestamp"])
    return out


def test_goes_out_when_the_real_broker_delivered_the_head(pair):
    store, manifest = pair
    at = manifest["T_servicesStartedMs"]
    doc = restart_preview(store, None, at, replay=False)
    late = {lv["level"]: lv for lv in doc["late"]["delay_levels"]}
    real = _b_deliveries(manifest)
    assert sorted(real) == [1, 2, 3, 5, 6]  # level 18 stayed pending in B
    assert (late[1]["overdue"], late[2]["overdue"]) == (2, 1)  # D1a, D1b; D2
    assert late[18]["goes_out_ms"] - at > manifest["T_stopMs"] - at  # D18: after B's 150 s
    for level, times in real.items():
        assert abs(late[level]["goes_out_ms"] - min(times)) < POLL, (
            level,
            late[level]["goes_out_ms"] - at,
            min(times) - at,
        )
    # the overdue levels go out with the first task: 1 s after the start (B: 993-1002 ms)
    assert late[1]["goes_out_ms"] == late[2]["goes_out_ms"] == at + 1000


def test_the_delay_view_and_the_restart_view_agree(pair):
    store, manifest = pair
    at = manifest["T_servicesStartedMs"]
    dv = {r["level"]: r for r in delay_view(store, at)["levels"]}
    late = {lv["level"]: lv for lv in restart_preview(store, None, at, replay=False)["late"]["delay_levels"]}
    assert set(late) == {lv for lv, r in dv.items() if r["backlog"]}
    for level, lv in late.items():
        r = dv[level]
        assert (lv["backlog"], lv["restart_offset"]) == (r["backlog"], r["corrected_offset"])
        # the head is the level's oldest unit: the delay view's overdue is the restart view's "late by"
        assert lv["overdue_by_ms"] == max(0, r["overdue_ms"])
        assert (lv["overdue"] > 0) == (r["overdue_ms"] >= 0)
