"""`roundtrip()`: parse -> build -> parse of a Construct definition, and generated data for every Struct
in `mqtool.formats` (`CASES`, keyed `module.name`). Synthetic data only: runs without ../shared."""

import importlib
import pkgutil

from construct import Struct
from hypothesis import strategies as st

import mqtool.formats
from mqtool.formats import layout
from mqtool.formats.commitlog import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, body_crc
from mqtool.formats.properties import build_properties
from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC


def roundtrip(fmt, data: bytes):
    """Parse `data`, build the result, parse that again: both parses and both builds must agree
    (padding may read as anything and builds as zeros, so the first build is compared, not `data`)."""
    first = fmt.parse(data)
    built = fmt.build(first)
    second = fmt.parse(built)
    assert second == first
    assert fmt.build(second) == built
    return first, built


def format_structs() -> dict[str, Struct]:
    """Every Construct `Struct` defined at module level in `mqtool.formats`, as `module.name`."""
    out: dict[str, Struct] = {}
    seen: set[int] = set()
    for m in pkgutil.iter_modules(mqtool.formats.__path__):
        mod = importlib.import_module(f"mqtool.formats.{m.name}")
        for name, value in vars(mod).items():
            if isinstance(value, Struct) and id(value) not in seen and not name.startswith("_"):
                seen.add(id(value))
                out[f"{m.name}.{name}"] = value
    return out


# ----------------------------------------------------------------- generated data
def fixed_bytes(fmt: Struct) -> st.SearchStrategy[bytes]:
    """Bytes of a fixed-size integer Struct: any value in every field, zeros in the padding."""
    fields = layout.fields(fmt)
    size = fmt.sizeof()

    @st.composite
    def gen(draw):
        data = bytearray(size)
        for f in fields:
            data[f.offset : f.offset + f.size] = draw(st.binary(min_size=f.size, max_size=f.size))
        return bytes(data)

    return gen()


ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(lambda a: f"[{a}]")
text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1, max_size=12)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def message_fields(draw, v2: bool) -> dict:
    """The fields after MAGICCODE of a V1 or V2 message (hosts v4/v6, any ints, empty or not bodies)."""
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(i32) & ~0x30 | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    topic = draw(st.text(min_size=1, max_size=160 if v2 else 30, alphabet=st.characters(blacklist_categories=["Cs"])))
    if not v2 and len(topic.encode()) > 127:
        topic = topic[:20]
    body = draw(st.binary(max_size=200))
    return {
        "body_crc": body_crc(body), "queue_id": draw(i32), "flag": draw(i32), "queue_offset": draw(i64),
        "physical_offset": draw(i64), "sys_flag": sys_flag, "born_timestamp": draw(i64),
        "born_host": f"{draw(ipv6 if born_v6 else ipv4)}:{draw(i32)}", "store_timestamp": draw(i64),
        "store_host": f"{draw(ipv6 if store_v6 else ipv4)}:{draw(i32)}", "reconsume_times": draw(i32),
        "prepared_transaction_offset": draw(i64), "body": body, "topic": topic,
        "properties": build_properties(draw(st.lists(st.tuples(text, text), max_size=5))),
    }


@st.composite
def commitlog_record_bytes(draw) -> bytes:
    from mqtool.formats.commitlog import commitlog_record

    kind = draw(st.sampled_from(["v1", "v2", "blank"]))
    if kind == "blank":
        return commitlog_record.build({"total_size": draw(st.integers(8, 1 << 30)), "magic_code": BLANK_MAGIC_CODE,
                                       "message": None})
    v2 = kind == "v2"
    return commitlog_record.build({"total_size": 0, "magic_code": MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
                                   "message": draw(message_fields(v2))})


def _message_bytes(v2: bool):
    from mqtool.formats.commitlog import message_v1, message_v2

    fmt = message_v2 if v2 else message_v1
    return message_fields(v2).map(fmt.build)


def _timerlog_blank_bytes():
    from mqtool.formats.timerlog import timerlog_blank

    return st.tuples(i32, i64).map(lambda t: timerlog_blank.build({"remaining": t[0], "zero": t[1]}))


def _dledger_entry_bytes():
    from mqtool.formats.dledger import dledger_entry

    return st.tuples(i32, i64, i64, i64, st.binary(max_size=200)).map(lambda t: dledger_entry.build(
        {"magic": t[0], "index": t[1], "term": t[2], "pos": t[3], "channel": 0, "chain_crc": 0, "body_crc": 0,
         "body": t[4]}))


def _dledger_blank_bytes():
    from mqtool.formats.dledger import blank_filler

    return st.integers(8, 4096).map(lambda n: blank_filler.build({"size": n}))


def _dledger_item_bytes():
    return st.one_of(_dledger_entry_bytes().filter(lambda b: b[:4] != b"\xff\xff\xff\xff"), _dledger_blank_bytes())


def _batch_message_bytes():
    from mqtool.formats.batchbody import batch_message

    return st.tuples(i32, i32, i32, st.binary(max_size=200), st.binary(max_size=200)).map(lambda t: batch_message.build(
        {"magic_code": t[0], "body_crc": t[1], "flag": t[2], "body": t[3], "properties": t[4]}))


def _rocksdb_key_bytes(offset: bool):
    from mqtool.formats.rocksdb_cq import build_cq_key, build_offset_key

    topic = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=40)
    if offset:
        return st.tuples(topic, i32, st.sampled_from(["max", "min"])).map(lambda t: build_offset_key(t[0], t[1], t[2]))
    return st.tuples(topic, i32, i64).map(lambda t: build_cq_key(*t))


def _struct(key: str) -> Struct:
    return format_structs()[key]


# Every Struct of mqtool.formats and how to generate its bytes; a new Struct needs a line here.
CASES = {
    "checkpoint.checkpoint": lambda: fixed_bytes(_struct("checkpoint.checkpoint")),
    "timercheck.timercheck": lambda: fixed_bytes(_struct("timercheck.timercheck")),
    "consumequeue.consumequeue_unit": lambda: fixed_bytes(_struct("consumequeue.consumequeue_unit")),
    "timerlog.timerlog_unit": lambda: fixed_bytes(_struct("timerlog.timerlog_unit")),
    "timerlog.timerlog_blank": _timerlog_blank_bytes,
    "timerwheel.timerwheel_slot": lambda: fixed_bytes(_struct("timerwheel.timerwheel_slot")),
    "commitlog.message_v1": lambda: _message_bytes(False),
    "commitlog.message_v2": lambda: _message_bytes(True),
    "commitlog.commitlog_record": commitlog_record_bytes,
    "batchcq.batchcq_unit": lambda: fixed_bytes(_struct("batchcq.batchcq_unit")),
    "batchbody.batch_message": _batch_message_bytes,
    "indexfile.index_header": lambda: fixed_bytes(_struct("indexfile.index_header")),
    "indexfile.index_entry": lambda: fixed_bytes(_struct("indexfile.index_entry")),
    "dledger.entry_header": lambda: fixed_bytes(_struct("dledger.entry_header")),
    "dledger.index_unit": lambda: fixed_bytes(_struct("dledger.index_unit")),
    "dledger.dledger_entry": _dledger_entry_bytes,
    "dledger.blank_filler": _dledger_blank_bytes,
    "dledger.data_item": _dledger_item_bytes,
    "rocksdb_cq.cq_key": lambda: _rocksdb_key_bytes(False),
    "rocksdb_cq.cq_value": lambda: fixed_bytes(_struct("rocksdb_cq.cq_value")),
    "rocksdb_cq.offset_key": lambda: _rocksdb_key_bytes(True),
    "rocksdb_cq.offset_value": lambda: fixed_bytes(_struct("rocksdb_cq.offset_value")),
    "rocksdb_cq.checkpoint_value": lambda: fixed_bytes(_struct("rocksdb_cq.checkpoint_value")),
}

assert TIMERLOG_BLANK_MAGIC  # the blank's Const is filled in by the build
