"""The `index` audit: clean on the demo and oracle stores, and each kind of damage found where it was made."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from indexkit import CASES

from conftest import FIXTURES, need_oracle
from mqtool.audit.index import looping_entries
from mqtool.audit.runner import run_local
from mqtool.builder.demo import demo_config
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.store import Store

DEMO = FIXTURES / "demo"
NAME = "20260921141320010"
SLOTS = 100
ENTRIES = 40 + SLOTS * 4  # position of entry 0 in a demo index file


def _index(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == "index"]


def test_demo_is_clean():
    report = run_local(Store.open(DEMO, demo_config()))
    s = report["summary"]["index"]
    assert _index(report) == []
    assert (s["files"], s["entries"], s["entries_checked"], s["unit_sample_every"]) == (1, 141, 141, 1)
    assert s["records_checked"] > 0 and s["not_indexed"] == s["no_record"] == s["wrong_key"] == s["looping"] == 0


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("basic-5.3.1", "pair_default/B", "pair-4.9/B")],
                         ids=lambda c: c.name)
def test_oracle_stores_are_clean(case):
    need_oracle()
    conf = BrokerConfig(raw={"maxHashSlotNum": str(case.hash_slot_num), "maxIndexNum": str(case.index_num)})
    report = run_local(Store.open(case.store, conf))
    assert _index(report) == [] and report["summary"]["index"]["entries_checked"] > 0


def _entry(data: bytearray, n: int) -> list[int]:
    return list(struct.unpack_from(">iqii", data, ENTRIES + n * 20))


def _put(data: bytearray, n: int, e: list[int]) -> None:
    struct.pack_into(">iqii", data, ENTRIES + n * 20, *e)


def test_damage_is_found(tmp_path):
    store = tmp_path / "demo"
    shutil.copytree(DEMO, store)
    path = store / "index" / NAME
    data = bytearray(path.read_bytes())
    # entry 4 is N2's UNIQ_KEY at 228 (see tests/golden/inspect-index-dump.json): point it into N2's body
    e4 = _entry(data, 4)
    assert e4[1] == 228
    _put(data, 4, [e4[0], 230, e4[2], e4[3]])
    # entry 5 (N2's KEYS word "N2"): point it at record 0 (N1, whose keys hash elsewhere)
    e5 = _entry(data, 5)
    _put(data, 5, [e5[0], 0, e5[2], e5[3]])
    # entries 7 and 6 point at each other: a loop
    e6, e7 = _entry(data, 6), _entry(data, 7)
    _put(data, 6, [e6[0], e6[1], e6[2], 7])
    _put(data, 7, [e7[0], e7[1], e7[2], 6])
    path.write_bytes(bytes(data))
    report = run_local(Store.open(store, demo_config()))
    got = {(f["offset"], f["severity"], f["message"].split(":")[0].split(" (")[0]) for f in _index(report)}
    at = {f["offset"] for f in _index(report)}
    assert ENTRIES + 4 * 20 in at and ENTRIES + 5 * 20 in at and ENTRIES + 6 * 20 in at and ENTRIES + 7 * 20 in at
    s = report["summary"]["index"]
    # looping: 6 and 7, and entry 125 whose prevIndex is 6 (the chain of its slot runs into the loop)
    assert struct.unpack_from(">i", data, ENTRIES + 125 * 20 + 16)[0] == 6
    assert (s["no_record"], s["wrong_key"], s["looping"]) == (1, 1, 3), got
    # N2 at 228 is no longer found under its UNIQ_KEY nor "N2"; the looped chains lose their records too
    assert s["not_indexed"] >= 2
    msgs = [f["message"] for f in _index(report) if f["offset"] == 228]
    assert any("DemoTopicA#N2" in m for m in msgs)


def test_looping_entries_by_hand():
    # entries 1..5: 1 -> 0 (end), 2 -> 1, 3 -> 4, 4 -> 3 (loop), 5 -> 4 (leads into it)
    prev = np.array([0, 1, 4, 3, 4])
    assert looping_entries(prev, 6).tolist() == [3, 4, 5]
    # a self link ends the broker's walk: no loop
    assert looping_entries(np.array([0, 2]), 3).tolist() == []
