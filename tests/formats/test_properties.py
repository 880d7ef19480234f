"""Properties strings: RocketMQ's parse rules, and the HashMap order of broker re-puts (spec §2.5, §2.6)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ORACLE, need_oracle
from mqtool.formats.javahash import hashmap_capacity, hashmap_order, java_string_hash
from mqtool.formats.properties import (
    broker_properties,
    broker_properties_length,
    build_properties,
    key_order,
    parse_pairs,
    parse_properties,
)
from mqtool.store.commitlog import CommitLog


def test_java_string_hash_known_values():
    # values RocketMQ wrote: ConsumeQueue tagsCodes and TimerLog REAL_TOPIC hashes in basic-5.3.1
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TagFill") == 115237917
    assert java_string_hash("TopicA") == -1784167150
    assert java_string_hash("") == 0
    assert java_string_hash("\u00e9t\u00e9") == 0xE9 * 31 * 31 + ord("t") * 31 + 0xE9  # UTF-16 units


def test_java_string_hash_of_undecodable_bytes_is_javas_replacement_character():
    # a stray 0xF8 byte in a record's TAGS: mqtool keeps it as U+DCF8 (surrogateescape); Java's
    # new String(bytes, UTF_8) holds U+FFFD there: 97 * 31 + 0xFFFD
    tags = b"a\xf8".decode("utf-8", "surrogateescape")
    assert java_string_hash(tags) == 97 * 31 + 65533 == 68540
    assert java_string_hash("\ud800") == 0xD800  # a lone surrogate of a Java String: its code unit


def test_parse_skips_what_rocketmq_skips():
    s = "A\x01x\x02\x02ab\x02\x01bc\x02KEY\x01\x02K\x01v\x02A\x01y\x02"
    # "" and "ab" are shorter than 3, "\x01bc" has no name, "KEY\x01" no value; A repeats: last wins
    assert parse_pairs(s) == [("A", "x"), ("K", "v"), ("A", "y")]
    assert parse_properties(s) == {"A": "y", "K": "v"}
    assert parse_properties("NOEND\x01v") == {"NOEND": "v"}  # a last pair without its 0x02


def test_hashmap_capacity_grows_past_the_load_factor():
    assert hashmap_capacity(16, 12) == 16
    assert hashmap_capacity(16, 13) == 32
    assert hashmap_capacity(128, 96) == 128
    assert hashmap_capacity(128, 97) == 256


@pytest.mark.parametrize("pair,capacity,other", [("pair_default", 128, 16), ("pair-4.9", 16, 128)])
def test_broker_reputs_are_in_hashmap_order(pair, capacity, other):
    """Every record the real services appended in B is serialised in HashMap(capacity) order."""
    need_oracle()
    manifest = json.loads((ORACLE / pair / "B.manifest.json").read_text())
    log = CommitLog.open(ORACLE / pair / "B")
    differ = 0
    for new in manifest["newRecords"]:
        pairs = parse_pairs(log.read(new["offset"]).properties_raw)
        assert hashmap_order(pairs, capacity) == pairs, new.get("label")
        assert broker_properties(pairs, capacity) == build_properties(pairs)
        differ += hashmap_order(pairs, other) != pairs
    assert differ == len(manifest["newRecords"])  # the other version's capacity would be wrong for every one


names = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1,
                max_size=12)
values = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1,
                 max_size=30)


@given(st.lists(st.tuples(names, values), max_size=20, unique_by=lambda p: p[0]))
def test_build_then_parse_round_trip(pairs):
    assert parse_pairs(build_properties(pairs)) == [p for p in pairs if len(p[0]) + len(p[1]) >= 2]


@given(st.lists(st.tuples(names, values), max_size=40, unique_by=lambda p: p[0]))
def test_hashmap_order_is_stable(pairs):
    """Re-inserting a HashMap's iteration order into a new map gives the same order back."""
    once = hashmap_order(pairs, 128)
    assert hashmap_order(once, 128) == once
    assert sorted(once) == sorted(pairs)


def test_op_bodies_of_both_versions():
    """5.3.1 batches offsets with a trailing ',' (oracle body "0,1,"); 4.9.8 writes one offset per op."""
    from mqtool.formats.opbody import build_op_body, parse_op_body

    assert build_op_body([0, 1]) == b"0,1,"
    assert build_op_body([7], v5=False) == b"7"
    assert parse_op_body(b"0,1,3,") == [0, 1, 3]
    assert parse_op_body(b"7") == [7]
    assert parse_op_body(b"x,,2") == [2]
    with pytest.raises(ValueError):
        build_op_body([1, 2], v5=False)


def test_broker_properties_length_without_the_string():
    # "DELAY\x013\x02ключ\x01v\x02": 5 + 1 + 1 + 1 + 8 (4 Cyrillic letters, 2 bytes each) + 1 + 1 + 1 = 19 bytes
    props = {"DELAY": "3", "ключ": "v"}
    assert broker_properties_length(props, 16) == 19 == len(broker_properties(props, 16).encode())
    assert broker_properties_length(props, 16, trailing=False) == 18  # 4.9.8: no last separator
    assert broker_properties_length({}, 16, trailing=False) == 0
    # the HashMap(16) order of the keys, None where it is the insertion order
    assert key_order(("b", "a"), 16).order == ("a", "b") and key_order(("a", "b"), 16).order is None
