"""delayOffset.json / consumerOffset.json: every real file parses to its values and dumps back byte for byte;
the tolerant reader and the fastjson writer on hand-written and random input."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.offsets_json import (
    FRESH_CONSUMER_TABLE_SIZE,
    ConfigFileError,
    ConsumerOffsets,
    DataVersion,
    DelayOffsets,
    derive_group_topic_map,
    dump_consumer_offsets,
    dump_delay_offsets,
    loads_lenient,
    parse_consumer_offsets,
    parse_delay_offsets,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
HALF = "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS"
TRANS_TOPICS = ["RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"]
DV_A = DataVersion(0, 0, 1795376091851)
DV_CONSUMER = DataVersion(0, 0, 1795376091850)
DV_B = DataVersion(15, 0, 1795376231519)
DV_POP = DataVersion(0, 0, 1795771331811)
DV_POP_DELAY = DataVersion(0, 0, 1795771331966)
DV_RETRY = DataVersion(0, 0, 1795770861030)
DV_RETRY_DELAY = DataVersion(0, 0, 1795770861104)
POP_RETRY = "%RETRY%GID_p_TopicP@GID_p"
POP_REVIVE = "rmq_sys_REVIVE_LOG_OracleCluster@CID_RMQ_SYS_REVIVE_GROUP"
POP_TOPIC = "TopicP@GID_p"
POP_GROUPS = {
    "GID_p": ["%RETRY%GID_p_TopicP", "TopicP"],
    "CID_RMQ_SYS_REVIVE_GROUP": ["rmq_sys_REVIVE_LOG_OracleCluster"],
}

# What each real file says, read by eye (path relative to ../shared).
EXPECTED: dict[str, DelayOffsets | ConsumerOffsets] = {
    "oracle/pair_default/A/config/delayOffset.json": DelayOffsets({1: 0, 2: 0, 3: 0, 5: 0, 6: 0, 18: 0}, DV_A),
    "oracle/pair_default/A/config/delayOffset.json.bak": DelayOffsets({1: 0, 2: 0, 3: 0, 5: 0, 6: 0, 18: 0}, DV_A),
    "oracle/pair_default/A/config/consumerOffset.json": ConsumerOffsets({}, DV_CONSUMER, {}),
    "oracle/pair_default/B/config/delayOffset.json": DelayOffsets({1: 2, 2: 1, 3: 2, 5: 1, 6: 1, 18: 0}, DV_B),
    "oracle/pair_default/B/config/delayOffset.json.bak": DelayOffsets({1: 2, 2: 1, 3: 2, 5: 1, 6: 1, 18: 0}, DV_B),
    "oracle/pair_default/B/config/consumerOffset.json": ConsumerOffsets(
        {HALF: {0: 14}, OP: {0: 1}}, DV_CONSUMER, {"CID_RMQ_SYS_TRANS": TRANS_TOPICS}
    ),
    "oracle/pair_default/B/config/consumerOffset.json.bak": ConsumerOffsets({}, DV_CONSUMER, {}),
    "oracle/pair-4.9/A/config/delayOffset.json": DelayOffsets({}, None),
    "oracle/pair-4.9/A/config/consumerOffset.json": ConsumerOffsets({}, None, None),
    "oracle/pair-4.9/B/config/delayOffset.json": DelayOffsets({1: 3, 2: 2, 3: 3, 5: 3, 6: 2}, None),
    "oracle/pair-4.9/B/config/delayOffset.json.bak": DelayOffsets({1: 3, 2: 2, 3: 3, 5: 3, 6: 2}, None),
    "oracle/pair-4.9/B/config/consumerOffset.json": ConsumerOffsets({HALF: {0: 11}, OP: {0: 2}}, None, None),
    "oracle/pair-4.9/B/config/consumerOffset.json.bak": ConsumerOffsets({}, None, None),
    "oracle/ha-async-5.3.1/master/config/consumerOffset.json": ConsumerOffsets(
        {}, DataVersion(0, 0, 1795774262676), {}
    ),
    "oracle/ha-async-5.3.1/master/config/consumerOffset.json.bak": ConsumerOffsets(
        {}, DataVersion(0, 0, 1795774262676), {}
    ),
    "oracle/ha-async-5.3.1/master/config/delayOffset.json": DelayOffsets({}, DataVersion(0, 0, 1795774262749)),
    "oracle/ha-async-5.3.1/master/config/delayOffset.json.bak": DelayOffsets({}, DataVersion(0, 0, 1795774262749)),
    "oracle/ha-async-5.3.1/slave/config/consumerOffset.json": ConsumerOffsets({}, DataVersion(0, 0, 1795774263168), {}),
    "oracle/ha-async-5.3.1/slave/config/consumerOffset.json.bak": ConsumerOffsets(
        {}, DataVersion(0, 0, 1795774263168), {}
    ),
    "oracle/pop-revive-5.3.1/A/config/consumerOffset.json": ConsumerOffsets({}, DV_POP, {}),
    "oracle/pop-revive-5.3.1/A/config/delayOffset.json": DelayOffsets({}, DV_POP_DELAY),
    "oracle/pop-revive-5.3.1/B/config/consumerOffset.json": ConsumerOffsets(
        {POP_RETRY: {0: 3}, POP_REVIVE: {0: 0, 7: 2}, POP_TOPIC: {0: 4}}, DV_POP, POP_GROUPS
    ),
    "oracle/pop-revive-5.3.1/B/config/consumerOffset.json.bak": ConsumerOffsets(
        {POP_RETRY: {0: 3}, POP_REVIVE: {0: 0, 7: 0}, POP_TOPIC: {0: 4}}, DV_POP, POP_GROUPS
    ),
    "oracle/pop-revive-5.3.1/B/config/delayOffset.json": DelayOffsets({}, DV_POP_DELAY),
    "oracle/pop-revive-5.3.1/B/config/delayOffset.json.bak": DelayOffsets({}, DV_POP_DELAY),
    "oracle/retry-dlq-5.3.1/A/config/consumerOffset.json": ConsumerOffsets({}, DV_RETRY, {}),
    "oracle/retry-dlq-5.3.1/A/config/delayOffset.json": DelayOffsets({}, DV_RETRY_DELAY),
    "oracle/retry-dlq-5.3.1/B/config/consumerOffset.json": ConsumerOffsets(
        {"TopicR@GID_r": {0: 4}, "%RETRY%GID_r@GID_r": {0: 6}}, DV_RETRY, {"GID_r": ["TopicR", "%RETRY%GID_r"]}
    ),
    "oracle/retry-dlq-5.3.1/B/config/consumerOffset.json.bak": ConsumerOffsets(
        {"TopicR@GID_r": {0: 4}, "%RETRY%GID_r@GID_r": {0: 6}}, DV_RETRY, {"GID_r": ["TopicR", "%RETRY%GID_r"]}
    ),
    "oracle/retry-dlq-5.3.1/B/config/delayOffset.json": DelayOffsets({3: 3, 4: 2, 5: 1}, DV_RETRY_DELAY),
    "oracle/retry-dlq-5.3.1/B/config/delayOffset.json.bak": DelayOffsets({3: 3, 4: 2, 5: 0}, DV_RETRY_DELAY),
    "real-stores/fork-4x-2021/config/delayOffset.json": DelayOffsets({}, None),
    "real-stores/fork-4x-2021/config/delayOffset.json.bak": DelayOffsets({}, None),
}


def real_files() -> list:
    """Every delayOffset/consumerOffset file under ../shared, or one skipped case saying why."""
    if not SHARED.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{SHARED} is absent: no real files"))]
    found = [
        p
        for pattern in ("oracle/*/*/config/*Offset.json*", "real-stores/*/config/*Offset.json*")
        for p in sorted(SHARED.glob(pattern))
    ]
    return [pytest.param(p, id=str(p.relative_to(SHARED))) for p in found]


def parse_and_dump(path: Path) -> tuple[DelayOffsets | ConsumerOffsets, str]:
    text = path.read_text(encoding="utf-8")
    if path.name.startswith("delayOffset"):
        value = parse_delay_offsets(text)
        return value, dump_delay_offsets(value)
    value = parse_consumer_offsets(text)
    return value, dump_consumer_offsets(value)


@pytest.mark.oracle
@pytest.mark.parametrize("path", real_files())
def test_real_file_parses_to_its_values_and_dumps_byte_exact(path: Path) -> None:
    value, dumped = parse_and_dump(path)
    rel = str(path.relative_to(SHARED))
    assert rel in EXPECTED, f"new real file {rel}: add its values to EXPECTED"
    assert value == EXPECTED[rel]
    assert dumped == path.read_text(encoding="utf-8")


@pytest.mark.oracle
def test_every_expected_real_file_exists() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    missing = [rel for rel in EXPECTED if not (SHARED / rel).is_file()]
    assert not missing


# --------------------------------------------------------------------------- tolerant reading


def test_quoted_keys_spacing_crlf_and_unknown_keys() -> None:
    text = (
        '{ "offsetTable" : { "1" : 7 ,\t2:  8 , -3:9 },\r\n'
        ' "extra": [1, 2.5, true, null, {"x": "y"}],\r\n'
        ' "dataVersion": {"timestamp": 5, "counter": 2, "other": "z"} }\r\n'
    )
    d = parse_delay_offsets(text)
    assert d.offset_table == {1: 7, 2: 8, -3: 9}
    assert d.data_version == DataVersion(counter=2, state_version=None, timestamp=5)


def test_delay_offset_helper_defaults_to_zero() -> None:
    d = parse_delay_offsets('{"offsetTable":{3:4}}')
    assert d.offset(3) == 4
    assert d.offset(18) == 0


def test_consumer_offsets_4x_without_data_version_and_helpers() -> None:
    c = parse_consumer_offsets('{\n\t"offsetTable":{\n\t\t"T@G":{0:6,1:3\n\t\t}\n\t}\n}')
    assert c.data_version is None and c.group_topic_map is None
    assert c.offset("T", "G", 1) == 3
    assert c.offset("T", "G", 9) is None
    assert c.offset("T", "other", 0) is None


def test_empty_tables_and_missing_table() -> None:
    assert parse_delay_offsets('{"offsetTable":{}}') == DelayOffsets({}, None)
    assert parse_delay_offsets("{}") == DelayOffsets({}, None)
    assert parse_consumer_offsets('{"offsetTable":null}') == ConsumerOffsets({}, None, None)


def test_single_quotes_escapes_bom_and_trailing_comma() -> None:
    c = parse_consumer_offsets("\ufeff{'offsetTable':{'a\\u0041\\t@g':{0:1,},},}")
    assert c.offset_table == {"aA\t@g": {0: 1}}


@pytest.mark.parametrize(
    ("text", "line", "col", "words"),
    [
        ("", 1, 1, "empty document"),
        ('{\n\t"offsetTable":{1:2 3}\n}', 2, 21, "expected ','"),
        ('{\n\t"offsetTable":{1:x}\n}', 2, 19, "expected a value"),
        ('{\n\t"offsetTable":{"a":2}\n}', 2, 17, "key must be an integer"),
        ('{\n\t"offsetTable":{1:2.5}\n}', 2, 19, "must be an integer"),
        ('{"offsetTable":{1:99999999999999999999}}', 1, 19, "out of range"),
        ('{"offsetTable":{1:2}', 1, 21, "end of file"),
        ('{"offsetTable":{1:2}} trailing', 1, 23, "after the end"),
        ('{"offsetTable":"abc', 1, 16, "unterminated string"),
        ("[1, 2]", 1, 1, "must be an object"),
        ("\x00\x01garbage", 1, 1, "expected a value"),
    ],
)
def test_garbage_raises_with_line_and_column(text: str, line: int, col: int, words: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_delay_offsets(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.line, err.col) == (line, col)
    assert words in str(err) and f"at line {line} col {col}" in str(err)


def test_consumer_garbage_names_the_member() -> None:
    with pytest.raises(ConfigFileError, match=r"groupTopicMap\['G'\] must be a list of strings"):
        parse_consumer_offsets('{"groupTopicMap":{"G":"T"},"offsetTable":{}}')
    with pytest.raises(ConfigFileError, match=r"offsetTable\['T@G'\] must be an object"):
        parse_consumer_offsets('{"offsetTable":{"T@G":5}}')


def test_loads_lenient_reads_other_config_files() -> None:
    assert loads_lenient("{1:{'a':[true,false,null,-2,1.5e3]},b:\"c\"}") == {
        1: {"a": [True, False, None, -2, 1500.0]},
        "b": "c",
    }
    if SHARED.is_dir():
        topics = loads_lenient((SHARED / "oracle/pair_default/B/config/topics.json").read_text())
        assert topics["topicConfigTable"]["SCHEDULE_TOPIC_XXXX"]["readQueueNums"] == 18


# --------------------------------------------------------------------------- fastjson writing


def test_dump_5x_delay_offsets_shape() -> None:
    d = DelayOffsets({18: 2, 1: 2, 3: 2, 2: 2}, DataVersion(1, 0, 1732262400000))
    assert dump_delay_offsets(d) == (
        '{\n\t"dataVersion":{\n\t\t"counter":1,\n\t\t"stateVersion":0,\n\t\t"timestamp":1732262400000\n\t},'
        '\n\t"offsetTable":{1:2,2:2,3:2,18:2\n\t}\n}'
    )


def test_dump_4x_data_version_without_state_version() -> None:
    d = DelayOffsets({}, DataVersion(3, None, 9))
    assert (
        dump_delay_offsets(d)
        == '{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"timestamp":9\n\t},\n\t"offsetTable":{}\n}'
    )


def test_dump_spec_consumer_example() -> None:
    c = ConsumerOffsets({"TopicTest@GID_A": {3: 2, 0: 6, 1: 3, 2: 3}, "%RETRY%GID_A@GID_A": {0: 0}})
    assert dump_consumer_offsets(c) == (
        '{\n\t"offsetTable":{\n\t\t"%RETRY%GID_A@GID_A":{0:0\n\t\t},\n\t\t"TopicTest@GID_A":{0:6,1:3,2:3,3:2'
        "\n\t\t}\n\t}\n}"
    )


def test_outer_order_is_concurrent_hash_map_order() -> None:
    """16 bins (fastjson made the map on load): HALF -> 5, OP -> 10; 1024 bins: OP 314 < HALF 661."""
    c = ConsumerOffsets({OP: {0: 1}, HALF: {0: 14}}, None, {"CID_RMQ_SYS_TRANS": TRANS_TOPICS[::-1]})
    loaded = dump_consumer_offsets(c)
    assert loaded.index(HALF) < loaded.index(OP)
    assert '["RMQ_SYS_TRANS_HALF_TOPIC","RMQ_SYS_TRANS_OP_HALF_TOPIC"]' in loaded
    fresh = dump_consumer_offsets(c, table_size=FRESH_CONSUMER_TABLE_SIZE)
    assert fresh.index(OP) < fresh.index(HALF)


def test_int_keys_wrap_by_table_size() -> None:
    """A 16-bin map holding queue 17 and 3: 17 lands in bin 1, before 3; twelve keys grow it to 32."""
    c = ConsumerOffsets({"T@G": {3: 0, 17: 0}})
    assert "{17:0,3:0\n" in dump_consumer_offsets(c)
    grown = ConsumerOffsets({"T@G": {k: 0 for k in [17, *range(11)]}})
    assert '"T@G":{0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,17:0\n' in dump_consumer_offsets(grown)


def test_string_escapes_like_serialize_writer() -> None:
    key = 'a"b\\c\td\x01e\x7ff\u2028g\u00e9h/@G'
    dumped = dump_consumer_offsets(ConsumerOffsets({key: {}}))
    assert '"a\\"b\\\\c\\td\\u0001e\\u007Ff\\u2028g\u00e9h/@G":{}' in dumped
    assert parse_consumer_offsets(dumped).offset_table == {key: {}}


def test_derive_group_topic_map_and_with_offset() -> None:
    table = {HALF: {0: 1}, OP: {0: 2}, "bad": {}, "a@b@c": {}, "T@": {}, "@G": {}}
    assert derive_group_topic_map(table) == {"CID_RMQ_SYS_TRANS": TRANS_TOPICS, "G": [""]}
    base = ConsumerOffsets({}, DV_CONSUMER, {})
    updated = base.with_offset("T", "G", 2, 40)
    assert updated.offset("T", "G", 2) == 40
    assert updated.group_topic_map == {"G": ["T"]}
    assert base.offset_table == {}
    assert ConsumerOffsets({}).with_offset("T", "G", 0, 1).group_topic_map is None


# --------------------------------------------------------------------------- random round trips

java_int = st.integers(-(1 << 31), (1 << 31) - 1)
java_long = st.integers(-(1 << 63), (1 << 63) - 1)
data_versions = st.none() | st.builds(DataVersion, java_long, st.none() | java_long, java_long)
text_keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=200)
@given(table=st.dictionaries(java_int, java_long, max_size=40), dv=data_versions)
def test_delay_round_trip(table: dict[int, int], dv: DataVersion | None) -> None:
    d = DelayOffsets(table, dv)
    text = dump_delay_offsets(d)
    assert parse_delay_offsets(text) == d
    assert dump_delay_offsets(parse_delay_offsets(text)) == text


@settings(max_examples=150)
@given(
    table=st.dictionaries(text_keys, st.dictionaries(java_int, java_long, max_size=20), max_size=20),
    dv=data_versions,
    gtm=st.none() | st.dictionaries(text_keys, st.lists(text_keys, max_size=8, unique=True), max_size=8),
    fresh=st.booleans(),
)
def test_consumer_round_trip(table, dv, gtm, fresh: bool) -> None:
    c = ConsumerOffsets(table, dv, gtm)
    size = FRESH_CONSUMER_TABLE_SIZE if fresh else 16
    text = dump_consumer_offsets(c, table_size=size)
    back = parse_consumer_offsets(text)
    assert back.offset_table == c.offset_table and back.data_version == dv
    if gtm is None:
        assert back.group_topic_map is None
    else:  # a HashSet: same topics, Java's order
        assert {g: set(ts) for g, ts in back.group_topic_map.items()} == {g: set(ts) for g, ts in gtm.items()}
    assert dump_consumer_offsets(back, table_size=size) == text
