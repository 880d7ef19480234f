"""DLedger entries, fillers, index units, checkpoint and currterm as DLedger 0.3.1.2 wrote them (oracle)."""

import json

import pytest
from construct import ConstructError
from hypothesis import given
from hypothesis import strategies as st

from conftest import ORACLE, need_oracle
from mqtool.formats.commitlog import commitlog_record
from mqtool.formats.dledger import (
    BODY_OFFSET,
    blank_filler,
    build_checkpoint,
    build_currterm,
    data_item,
    dledger_entry,
    entry_header,
    index_unit,
    parse_checkpoint,
    parse_currterm,
    parse_properties_text,
)

STORE = ORACLE / "dledger-5.3.1"
HOME = STORE / "store/dledger-n0"


def _joined(d):
    """The files of a mapped-file directory concatenated; they are full-size and start at 0."""
    files = sorted(d.iterdir())
    assert int(files[0].name) == 0
    return b"".join(f.read_bytes() for f in files)


@pytest.fixture(scope="module")
def oracle():
    need_oracle()
    recs = [json.loads(line) for line in (STORE / "records.jsonl").read_text().splitlines()]
    return recs, _joined(HOME / "data"), _joined(HOME / "index")


def test_sizes_match_dledger_constants():
    assert entry_header.sizeof() == BODY_OFFSET == 48  # DLedgerEntry.BODY_OFFSET
    assert index_unit.sizeof() == 32  # DLedgerMmapFileStore.INDEX_UNIT_SIZE


def test_every_entry_parses_as_dledger_decoded_it_and_rebuilds(oracle):
    recs, data, _ = oracle
    assert len(recs) == 42
    for r in recs:
        pos = r["dledgerPos"]
        c = data_item.parse(data[pos:]).item
        assert (c.magic, c.size, c.index, c.term, c.pos) == (
            r["dledgerMagic"], r["dledgerSize"], r["dledgerIndex"], r["dledgerTerm"], pos)
        assert (c.chain_crc, c.body_crc, c.body_length, c.channel) == (
            r["dledgerChainCrc"], r["dledgerBodyCrc"], r["dledgerBodyLength"], 0)
        body = commitlog_record.parse(c.body)
        assert body.total_size == r["storeSize"] == c.body_length
        assert body.message.physical_offset == r["physicalOffset"] == pos + BODY_OFFSET
        assert (body.message.topic, body.message.queue_id, body.message.queue_offset) == (
            r["topic"], r["queueId"], r["queueOffset"])
        assert dledger_entry.build(c) == data[pos : pos + c.size]


def test_the_file_end_filler(oracle):
    recs, data, _ = oracle
    last_in_first = max((r for r in recs if r["dledgerPos"] < 16384), key=lambda r: r["dledgerPos"])
    at = last_in_first["dledgerPos"] + last_in_first["dledgerSize"]
    assert at == 15021
    item = data_item.parse(data[at:16384])
    assert (item.magic, item.item.size) == (-1, 16384 - 15021)
    assert blank_filler.build({"size": 1363}) == data[at:16384]
    assert data[at : at + 8] == bytes.fromhex("ffffffff00000553")


def test_every_index_unit_points_at_its_entry_and_rebuilds(oracle):
    recs, _, index = oracle
    assert len(index) == 2 * 1024
    for r in recs:
        at = r["dledgerIndex"] * 32
        u = index_unit.parse(index[at:])
        assert (u.magic, u.pos, u.size, u.index, u.term) == (1, r["dledgerPos"], r["dledgerSize"],
                                                              r["dledgerIndex"], r["dledgerTerm"])
        assert index_unit.build(u) == index[at : at + 32]
    assert set(index[42 * 32 :]) == {0}


def test_checkpoint_and_currterm_parse_and_rebuild_byte_for_byte():
    need_oracle()
    for name in ("checkpoint", "checkpoint.bak"):
        text = (HOME / name).read_text()
        assert parse_checkpoint(text) == {"end_index": 41, "committed_index": 41}
        assert build_checkpoint(41, 41) == text
    text = (HOME / "currterm").read_text()
    assert parse_currterm(text) == {"curr_term": 0, "vote_leader": "n0"}
    assert build_currterm(0, "n0") == text


def test_properties_text_is_read_leniently():
    text = "# written by hand\n\n  committedIndex = 7 \r\nendIndex:9\n! other comment\nodd value here\nbare\n"
    assert parse_properties_text(text) == {"committedIndex": "7", "endIndex": "9", "odd": "value here",
                                           "bare": ""}
    assert parse_checkpoint(text) == {"end_index": 9, "committed_index": 7}
    assert parse_checkpoint("committedIndex=x\n") == {"end_index": None, "committed_index": None}
    assert parse_currterm("voteLeader=\ncurrTerm=3\n") == {"curr_term": 3, "vote_leader": ""}
    assert build_currterm(3, None) == "voteLeader=\ncurrTerm=3\n"


def test_a_short_entry_does_not_parse():
    with pytest.raises(ConstructError):
        dledger_entry.parse(bytes.fromhex("00000001") + bytes(20))


i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(magic=i32, index=i64, term=i64, pos=i64, channel=i32, chain=i32, crc=i32, body=st.binary(max_size=200))
def test_entry_round_trip(magic, index, term, pos, channel, chain, crc, body):
    raw = dledger_entry.build({"magic": magic, "index": index, "term": term, "pos": pos, "channel": channel,
                               "chain_crc": chain, "body_crc": crc, "body": body})
    assert len(raw) == BODY_OFFSET + len(body)
    c = dledger_entry.parse(raw)
    assert (c.size, c.body_length, c.body, c.index, c.term, c.pos) == (len(raw), len(body), body, index, term, pos)
    assert dledger_entry.build(c) == raw
    h = entry_header.parse(raw)
    assert (h.magic, h.chain_crc, h.body_crc, h.channel) == (magic, chain, crc, channel)
    assert entry_header.build(h) == raw[:BODY_OFFSET]


@given(magic=i32, pos=i64, size=i32, index=i64, term=i64)
def test_index_unit_round_trip(magic, pos, size, index, term):
    raw = index_unit.build({"magic": magic, "pos": pos, "size": size, "index": index, "term": term})
    assert len(raw) == 32 and index_unit.build(index_unit.parse(raw)) == raw


@given(size=st.integers(8, 5000))
def test_filler_round_trip(size):
    raw = blank_filler.build({"size": size})
    assert len(raw) == size and raw[:4] == b"\xff" * 4
    assert blank_filler.parse(raw).size == size
    assert data_item.parse(raw).magic == -1


@given(end=st.integers(-1, 2**62), committed=st.integers(-1, 2**62), term=st.integers(0, 2**62),
       leader=st.none() | st.from_regex(r"n[0-9]{1,3}", fullmatch=True))
def test_properties_files_round_trip(end, committed, term, leader):
    assert parse_checkpoint(build_checkpoint(end, committed)) == {"end_index": end, "committed_index": committed}
    assert parse_currterm(build_currterm(term, leader)) == {"curr_term": term, "vote_leader": leader or ""}
