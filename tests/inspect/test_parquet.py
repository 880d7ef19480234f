"""`messages --format parquet` from the scan's Arrow columns (`inspect/parquet.py`) holds the record path's table.

The reference is the record path the CLI used before: `find_messages` -> `record_dict` ->
`output.write_parquet`. Both files are read back with pyarrow and compared whole (schema, every
row and column, row groups), with the scan's findings, on the demo fixture, the oracle stores,
DLedger stores, a generated store with odd records and a damaged demo, under every body mode, with
and without --verify/--decompress, the column filters and --limit, in chunks of the default size and of 7.
Without `mqtool._native` the record path writes every row.
"""

import functools
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dledgerkit import make_converted_store

from conftest import FIXTURES, ORACLE, ORACLE_STORES, need_oracle, sibling
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect import messages, parquet
from mqtool.inspect.messages import MessageQuery, find_messages, scan_findings
from mqtool.inspect.parquet import fast_query, write_messages
from mqtool.inspect.records import record_dict
from mqtool.output import parquet_schema, write_parquet
from mqtool.store import extension
from mqtool.store.store import Store

DEMO = FIXTURES / "demo"


_jl = sibling(__file__, "test_jsonlines")  # its odd records and queries are this test's too
ODD, _queries, _odd_store = _jl.ODD, _jl._queries, _jl._odd_store
MODES = (("none", False), ("text", False), ("hex", True), ("base64", False), ("text", True))
SOME_MODES = (("text", True), ("hex", False))  # the oracle stores: every column built, decompressed or not


def _outcome(fn, path: Path):
    """(the table read back, or the exception type raised, the row group sizes)."""
    try:
        fn(path)
    except (UnicodeEncodeError, pa.ArrowInvalid) as e:  # the record path's own failure on surrogates
        return type(e), None
    f = pq.ParquetFile(path)
    return pq.read_table(path), [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]


def _record_path(store: Store, q: MessageQuery, verify: bool, body: str, decompress: bool, path: Path):
    def run(p):
        _, recs = find_messages(store, q, verify)
        write_parquet((record_dict(r, body, decompress) for r in recs), p, "messages")

    return _outcome(run, path), scan_findings(store)


def _column_path(store: Store, q: MessageQuery, verify: bool, body: str, decompress: bool, path: Path):
    return _outcome(lambda p: write_messages(store, q, p, verify, body, decompress), path), scan_findings(store)


@pytest.fixture
def path():
    """The columns path: the extension is built."""
    assert extension.kernel("body_crcs") is not None, (
        "mqtool._native is not built: python3 setup.py build_ext --inplace"
    )
    return "columns"


def _check(store: Store, tmp: Path, modes=MODES, queries=None) -> int:
    rows = 0
    for q in queries or _queries(store):
        for verify in (False, True):
            for body, decompress in modes:
                (want, want_groups), want_found = _record_path(store, q, verify, body, decompress, tmp / "a.parquet")
                (got, got_groups), got_found = _column_path(store, q, verify, body, decompress, tmp / "b.parquet")
                if isinstance(want, type):
                    assert got is want, (q, verify, body, decompress)
                    continue
                assert got.schema.remove_metadata() == parquet_schema("messages")
                assert got.equals(want), (q, verify, body, decompress)
                assert got_groups == want_groups
                assert got_found == want_found, (q, verify, body, decompress)
                rows += want.num_rows
    return rows


def test_demo(tmp_path, path, chunk_records, demo):
    assert _check(demo, tmp_path) > 1000


@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_oracle_stores(name, tmp_path, path, open_oracle):
    assert _check(open_oracle(ORACLE_STORES[name][0]), tmp_path, SOME_MODES) > 0


def test_dledger_oracle_store(tmp_path, path):
    need_oracle()
    assert _check(Store.open(ORACLE / "dledger-5.3.1/store"), tmp_path, SOME_MODES) > 0


def test_converted_dledger_store(tmp_path, path, chunk_records):
    root = make_converted_store(tmp_path / "dl")[0]
    assert _check(Store.open(root), tmp_path) > 0


def test_generated_store_with_odd_records(tmp_path, path, chunk_records):
    """Odd bytes Arrow can hold (control characters, U+2028, IPv6 hosts, bad CRCs, bodies not UTF-8,
    compressed bodies good and bad, repeated property names): the same table."""
    odd = [o for o in ODD if "\udcff" not in o[0] and "\udce9" not in o[1]]
    odd.append(("t\ufffd", "k\x01\ufffd\x02", "\ufffd".encode(), {}))  # a real U+FFFD is not a replaced byte
    store = Store.open(_odd_store(tmp_path / "odd", odd))
    assert len(list(store.commitlog.iter_records())) == 60
    assert _check(store, tmp_path) > 0


def test_surrogates_fail_as_before(tmp_path, path):
    """Topics or properties that are not UTF-8 (surrogates in the record path): Arrow refuses them in
    both paths, the same way; a query that leaves them out writes the rest."""
    store = Store.open(_odd_store(tmp_path / "odd", ODD))
    qs = [MessageQuery(), MessageQuery(topic="bad\udcff"), MessageQuery(topic="t"), MessageQuery(topic="T")]
    assert _check(store, tmp_path, (("none", False),), qs) == 12  # topic T: 6 rows, twice (--verify)
    for q in qs[:3]:
        assert _column_path(store, q, False, "none", False, tmp_path / "c.parquet")[0][0] is UnicodeEncodeError


def test_damaged_demo(tmp_path, path, torn_demo):
    assert _check(torn_demo, tmp_path, (("none", False), ("text", False))) > 0


def test_row_groups_of_65536(tmp_path, monkeypatch):
    """More rows than a row group, in chunks that do not divide it: groups of 65,536 and the rest."""
    monkeypatch.setattr(parquet, "ROW_GROUP", 25)
    monkeypatch.setattr(messages, "commitlog_chunks", functools.partial(messages.commitlog_chunks, chunk_records=7))
    store = Store.open(DEMO, load_broker_conf(FIXTURES / "demo.broker.conf"))
    n = write_messages(store, MessageQuery(limit=60), tmp_path / "g.parquet", body="none")
    f = pq.ParquetFile(tmp_path / "g.parquet")
    assert n == 60 and [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [25, 25, 10]


def test_fast_query_says_which_options_fall_back():
    assert fast_query(MessageQuery(topic="t", queue_id=1, since_ms=0, until_ms=5, from_offset=0, limit=5))
    assert not fast_query(MessageQuery(key="k"))
    assert not fast_query(MessageQuery(uniq_key="k"))
    assert not fast_query(MessageQuery(tag="k"))
    assert not fast_query(MessageQuery(from_offset=1 << 64))


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--body", "none", "--topic", "DemoTopicA", "--limit", "5"],
        ["--body", "hex", "--verify"],
        ["--decompress", "--body", "base64"],
        ["--queue-id", "1", "--since", "2000-01-01", "--from-offset", "1000"],
    ],
)
def test_cli_writes_the_record_paths_table(tmp_path, monkeypatch, args):
    """The CLI through the columns against the CLI with the record path (`fast_query` False)."""
    from typer.testing import CliRunner

    from mqtool.cli.app import app

    def cli(out: Path):
        cmd = [
            "inspect",
            str(DEMO),
            "messages",
            "--config",
            str(FIXTURES / "demo.broker.conf"),
            *args,
            "--format",
            "parquet",
            "--output",
            str(out),
        ]
        r = CliRunner().invoke(app, cmd)
        assert r.exit_code == 0 and r.exception is None, r.output
        return r

    fast = cli(tmp_path / "fast.parquet")
    monkeypatch.setattr(parquet, "fast_query", lambda q: False)
    slow = cli(tmp_path / "slow.parquet")
    assert fast.output.replace("fast.parquet", "slow.parquet") == slow.output
    want = pq.read_table(tmp_path / "slow.parquet")
    assert want.num_rows > 0 and pq.read_table(tmp_path / "fast.parquet").equals(want)


def test_body_crcs_are_the_brokers_crc():
    """The extension's CRC of each body (where the scan did not compute it) is `UtilAll.crc32`: zlib's
    CRC32 & 0x7FFFFFFF; 0 for an empty body; a span outside the buffer is refused, not read."""
    data = np.frombuffer(bytes(range(256)) * 20 + b"\xff\xfe\x00\xed\xa0\x80", np.uint8)
    pos = np.array([0, 5, 100, 4000, 5120, 0, 5125], np.int64)
    lens = np.array([0, 1, 3000, 1120, 6, 5126, 1], np.int64)
    out = np.full(len(pos), -1, np.int64)
    extension.kernel("body_crcs")(data, pos, lens, out)
    assert out.tolist() == [0] + [
        zlib.crc32(data[p : p + n].tobytes()) & 0x7FFFFFFF
        for p, n in zip(pos[1:].tolist(), lens[1:].tolist(), strict=True)
    ]
    assert out[3] == zlib.crc32(bytes(range(160, 256)) + bytes(range(256)) * 4) & 0x7FFFFFFF
    with pytest.raises(IndexError):
        extension.kernel("body_crcs")(data, np.array([5120], np.int64), np.array([7], np.int64), out)


def test_without_the_extension_the_record_path_writes_every_row(tmp_path):
    """Where the extension is missing (`extension.plain_python()`: as built without a compiler), the
    same table, every row through the record path, and the same findings."""
    odd = [o for o in ODD if "\udcff" not in o[0] and "\udce9" not in o[1]]
    root = _odd_store(tmp_path / "odd", odd)
    for body, decompress in MODES:
        native = _column_path(Store.open(root), MessageQuery(), True, body, decompress, tmp_path / "native.parquet")
        with extension.plain_python():
            assert extension.kernel("body_crcs") is None
            plain = _column_path(Store.open(root), MessageQuery(), True, body, decompress, tmp_path / "plain.parquet")
        assert native[0][0].num_rows == 60 and plain == native
