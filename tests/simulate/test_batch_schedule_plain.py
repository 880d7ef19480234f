"""The delay levels' batch delivery reads a plain properties string without a map
(`batchread.read_plain`: one match of its key sequence gives REAL_TOPIC, REAL_QID and UNIQ_KEY, and
the string's own length is the re-put's); a string that is not plain (a duplicate key, an empty
name or value, a segment without a separator) is parsed into a map as before. The event log and the
summary equal the per-message walk's, on 5.3 and 4.9 brokers, and `read_plain` answers what the
light read answers."""

import io

import pytest
from reference_schedule import ReferenceSchedule

import mqtool.simulate.batchread as batchread
import mqtool.simulate.runner as runner_mod
import mqtool.simulate.schedule as schedule_mod
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC
from mqtool.formats.properties import broker_properties_length as props_length
from mqtool.formats.properties import parse_properties
from mqtool.formats.sysflag import BORNHOST_V6
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.runner import simulate
from mqtool.store import propscan, recordfiles
from mqtool.store.store import Store
from simkit import spy_read_plain

START = 1_800_000_000_000
S, P = "\x02", "\x01"


def _shapes(i: int, level: int) -> list[tuple[str, bool]]:
    """(raw properties string, plain?) of record `i`: plain strings of several key sequences and the
    ones a template does not take or whose map is shorter than the string."""
    u = f"UNIQ_KEY{P}D{i:05d}"
    d = f"DELAY{P}{level}"
    t = f"REAL_TOPIC{P}Bench"
    q = f"REAL_QID{P}{i % 3}"
    return [
        (S.join([u, d, t, q]) + S, True),  # the broker's string (5.x: a trailing separator)
        (S.join([u, d, t, q]), True),  # 4.9.8 writes none
        (S.join([t, q, d, u, f"KEYS{P}ключ é"]) + S, True),  # another order, a non-ASCII value
        (S.join([d, t, f"A.B*(x{P}v", u, q]) + S, True),  # a key with regex metacharacters (no REAL_QID: see
        # test_batch_schedule's test_a_real_qid_java_cannot_parse_ends_the_task)
        (S.join([d, t, q]) + S, True),  # no UNIQ_KEY
        (S.join([u, d, t, f"KEYS{P}a{P}b", q]) + S, True),  # a value holding the name-value separator
        (S.join([u, d, t, f"ИМЯ{P}v", q]) + S, True),  # a non-ASCII key
        (S.join([u, d, t, q, f"REAL_QID{P}{(i + 1) % 3}"]) + S, False),  # a duplicate key: the last wins
        (S.join([u, d, t, q, u]) + S, False),  # a duplicate key of the same value: the map is shorter
        (S.join([u, d, t, f"KEYS{P}", q]) + S, False),  # an empty value
        (S.join([u, d, t, f"{P}x", q]) + S, False),  # an empty name
        (S.join([u, d, t, "JUNK", q]) + S, False),  # a segment without a separator
        (S.join([u, d, t, q]) + S + S, False),  # an empty segment at the end
    ]


N_SHAPES = len(_shapes(0, 1))


def _build(root, version: str, n: int = 13 * 24):
    config = BrokerConfig.for_version(version)
    with StoreWriter(root, config, version) as w:
        for i in range(n):
            level = 1 + i % 2
            raw, _plain = _shapes(i, level)[(i // 2) % N_SHAPES]
            ts = START - 40_000 + i if i < n * 2 // 3 else START + (i - n * 2 // 3) * 90
            fields = {"sys_flag": BORNHOST_V6, "born_host": "[::1]:7"} if i % 11 == 4 else {}
            w.append_message(RMQ_SYS_SCHEDULE_TOPIC, level - 1, b"b" * (i % 7), raw, store_timestamp=ts,
                             born_timestamp=ts, **fields)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch: bool, version: str, monkeypatch) -> tuple[str, dict, list]:
    monkeypatch.setattr(runner_mod, "ScheduleService", schedule_mod.ScheduleService if batch else ReferenceSchedule)
    answers = spy_read_plain(monkeypatch, schedule_mod)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 3_600_000, None, seed=1, broker_version=version, sink=sink)
    return sink.getvalue(), res.summary, answers


@pytest.mark.parametrize("version", ["5.3", "4.9"])
@pytest.mark.parametrize("map_from", [2, 1 << 20])  # spans mapped (sparse ones) or read
def test_batch_equals_the_per_message_walk(tmp_path, monkeypatch, version, map_from):
    monkeypatch.setattr(recordfiles, "MAP_FROM", map_from)
    monkeypatch.setattr(recordfiles, "SPARSE", 16)
    monkeypatch.setattr(schedule_mod, "BATCH_READ", 2)
    store, config = _build(tmp_path / "s", version)
    log1, sum1, _ = _run(store, config, False, version, monkeypatch)
    log2, sum2, answers = _run(store, config, True, version, monkeypatch)
    assert log2 == log1 and sum2 == sum1
    assert log1.count('"event":"deliver"') == 13 * 24
    plain = sum(1 for a in answers if a is not None and len(a) == 2)
    mapped = sum(1 for a in answers if a is not None and len(a) == 3)
    # the first string of each plain sequence is parsed into a map (it makes the template), the rest matched
    # the 208 units due at the start are read by batches: 112 plain strings (7 key sequences, the first
    # of each parsed into a map to make its template) and 96 others
    assert mapped == 96 + 7 and plain >= 112 - 7 and plain + mapped >= 208
    assert '"uniq_key":"D00014"' in log1 and '"uniq_key":null' in log1  # (shapes 0 and 4)
    assert '"queue_id":1' in log1 and '"queue_id":0' in log1


@pytest.mark.parametrize("map_from", [0, 1 << 20])
def test_read_plain_equals_the_light_read(tmp_path, monkeypatch, map_from):
    monkeypatch.setattr(recordfiles, "MAP_FROM", map_from)
    monkeypatch.setattr(recordfiles, "SPARSE", 0 if map_from == 0 else 1 << 40)
    store, _ = _build(tmp_path / "s", "5.3")
    fast = MappedBase(store)
    wanted = ("REAL_TOPIC", "REAL_QID", "UNIQ_KEY")
    counts = {2: 0, 3: 0}
    try:
        for level in (1, 2):
            units = [u for _o, u in fast.cq_units(RMQ_SYS_SCHEDULE_TOPIC, level - 1, 0, 1000)]
            for shift in (0, 1):  # a byte off, nothing is a record
                phys = [u[0] + shift for u in units]
                got = batchread.read_plain(fast, phys, [u[1] for u in units], wanted)
                for k, (p, g) in enumerate(zip(phys, got, strict=True)):
                    light = fast.read(p, False, True)
                    assert (g is None) == (light is None) == (shift == 1), (level, k)
                    if g is None:
                        continue
                    counts[len(g)] += 1
                    props, body_len, sys_flag = light
                    if len(g) == 3:
                        assert g == light
                        continue
                    n, values = g
                    hosts = 28 if sys_flag & BORNHOST_V6 else 16
                    assert n == props_length(props, 128) + body_len + hosts
                    assert values == tuple(None if props.get(w) is None else props[w].encode() for w in wanted)
    finally:
        fast.close()
    # 156 records a queue, 12 of each shape: every plain string but the first of its key sequence (7
    # sequences, whose templates the second queue finds made) by the match; every other one by a map
    assert counts == {2: 2 * 7 * 12 - 7, 3: 2 * 6 * 12 + 7}


def test_plain_template_rejects_what_the_splits_do_not_take():
    wanted = ("REAL_TOPIC",)
    for i in range(N_SHAPES):
        raw, plain = _shapes(7, 1)[i]
        t = propscan.template_of(raw, parse_properties(raw), wanted)
        assert (t is not None) == plain, raw
        if t is not None:
            assert t.keys[t.groups[0]] == b"REAL_TOPIC" and t.pad == (0 if raw.endswith(S) else 1)
