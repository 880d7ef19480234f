"""`messages --json` from columns (`inspect/jsonlines.py`) prints the record path's bytes, and leaves its findings.

The reference is the record path the CLI used before: `find_messages` -> `record_dict` ->
`output.write_jsonl`. Every store the tests have (the demo fixture, the oracle stores, DLedger
stores, a generated store with odd properties, non-UTF-8 topics, properties and bodies, IPv6 hosts,
compressed bodies, and a damaged copy of the demo) under every body mode, with and without
--verify/--decompress, the column filters and --limit, in chunks of the default size and of 7, written
on the calling thread and on two worker threads. Without `mqtool._native` the record path writes
every row (`test_without_the_extension_the_record_path_writes_every_row`).
"""

import functools
import io
import os
import shutil
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest
from dledgerkit import make_converted_store

from conftest import FIXTURES, ORACLE, ORACLE_STORES, PROJECT, need_oracle
from mqtool.cli.common import _default
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, body_crc, commitlog_record
from mqtool.formats.properties import build_properties
from mqtool.inspect import jsonlines, messages
from mqtool.inspect.jsonlines import fast_query, message_lines
from mqtool.inspect.messages import MessageQuery, find_messages, scan_findings
from mqtool.inspect.records import record_dict
from mqtool.output import write_jsonl, write_jsonl_parts
from mqtool.store import extension
from mqtool.store.store import Store

DEMO = FIXTURES / "demo"


def _text_out() -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="\n")


def _record_path(store: Store, q: MessageQuery, verify: bool, body: str, decompress: bool):
    raw, out = _text_out()
    _, recs = find_messages(store, q, verify)
    write_jsonl((record_dict(r, body, decompress) for r in recs), out, _default)
    out.flush()
    return raw.getvalue(), scan_findings(store)


def _fast_path(store: Store, q: MessageQuery, verify: bool, body: str, decompress: bool, threads: bool = False):
    raw, out = _text_out()
    write_jsonl_parts(message_lines(store, q, verify, body, decompress, threads=threads), out, _default)
    out.flush()
    return raw.getvalue(), scan_findings(store)


def _queries(store: Store) -> list[MessageQuery]:
    recs = list(store.commitlog.iter_records(verify_crc=False))
    assert recs
    mid, last = recs[len(recs) // 2], recs[-1]
    times = sorted(r.store_timestamp for r in recs)
    keyed = next((r for r in recs if r.keys), mid)
    return [
        MessageQuery(),
        MessageQuery(topic=mid.topic),
        MessageQuery(topic=mid.topic, queue_id=mid.queue_id, limit=2),
        MessageQuery(queue_id=mid.queue_id),
        MessageQuery(topic="no-such-topic"),
        MessageQuery(from_offset=mid.physical_offset + 1),
        MessageQuery(to_offset=mid.physical_offset + 1),
        MessageQuery(from_offset=recs[1].physical_offset if len(recs) > 1 else 0, to_offset=last.physical_offset),
        MessageQuery(since_ms=times[len(times) // 4], until_ms=times[3 * len(times) // 4]),
        MessageQuery(since_ms=1 << 70),
        MessageQuery(limit=1),
        MessageQuery(limit=0),
        MessageQuery(limit=len(recs) - 1),
        MessageQuery(key=keyed.keys[0] if keyed.keys else "k"),  # the record path, whole query
    ]


@pytest.fixture(params=[False, True], ids=["serial", "threads"])
def threads(request) -> bool:
    """The extension's writer on the calling thread (a small CommitLog's path), or on two worker threads
    while the walk goes on, each chunk's rows in two halves (`_pipelined`, a big CommitLog's path)."""
    assert extension.kernel("json_lines") is not None, (
        "mqtool._native is not built: python3 setup.py build_ext --inplace"
    )
    return request.param


def _check(
    store: Store,
    modes=(("none", False), ("text", False), ("hex", True), ("base64", False), ("text", True)),
    threads: bool = False,
) -> int:
    lines = 0
    for q in _queries(store):
        for verify in (False, True):
            for body, decompress in modes:
                want = _record_path(store, q, verify, body, decompress)
                got = _fast_path(store, q, verify, body, decompress, threads)
                assert got[0] == want[0], (q, verify, body, decompress)
                assert got[1] == want[1], (q, verify, body, decompress)
                lines += want[0].count(b"\n")
    return lines


def test_demo(threads, chunk_records, demo):
    assert _check(demo, threads=threads) > 1000


@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_oracle_stores(name, threads, open_oracle):
    assert _check(open_oracle(ORACLE_STORES[name][0]), threads=threads) > 0


def test_dledger_oracle_store(threads):
    need_oracle()
    store = Store.open(ORACLE / "dledger-5.3.1/store")
    assert _check(store, threads=threads) > 0
    raw, _ = _fast_path(store, MessageQuery(limit=1), False, "none", False, threads)
    assert b', "dledger": {"index": ' in raw


def test_converted_dledger_store(tmp_path, threads, chunk_records):
    root = make_converted_store(tmp_path)[0]
    store = Store.open(root)
    assert _check(store, threads=threads) > 0
    raw, _ = _fast_path(store, MessageQuery(), False, "none", False, threads)
    assert raw.count(b'"dledger": ') == 3  # the three DLedger entries; the old CommitLog records have none


def _record(
    pos: int,
    topic: str,
    props: str,
    body: bytes,
    *,
    v6: tuple[bool, bool] = (False, False),
    sys_flag: int = 0,
    v2: bool = False,
    crc_ok: bool = True,
) -> bytes:
    born = "[2001:db8::1]:-3" if v6[0] else "10.1.2.3:65535"
    stored = "[::ffff:10.0.0.1]:10911" if v6[1] else "127.0.0.1:-2147483648"
    return commitlog_record.build(
        {
            "total_size": 0,
            "magic_code": MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
            "message": {
                "body_crc": body_crc(body) if crc_ok else 12345,
                "queue_id": -7 if v2 else 3,
                "flag": -(2**31),
                "queue_offset": -(2**63),
                "physical_offset": pos,
                "sys_flag": sys_flag | (0x10 if v6[0] else 0) | (0x20 if v6[1] else 0),
                "born_timestamp": 2**63 - 1,
                "born_host": born,
                "store_timestamp": 1_700_000_000_000 + pos,
                "store_host": stored,
                "reconsume_times": -1,
                "prepared_transaction_offset": -1,
                "body": body,
                "topic": topic,
                "properties": props,
            },
        }
    )


ODD = [  # (topic, properties, body, options)
    ("T", build_properties([("UNIQ_KEY", "ABC"), ("KEYS", "k1 k2"), ("TAGS", "a||b")]), b"hello", {}),
    (
        'T"q\\t',
        build_properties([('a"b', "c\\d"), ("ctl", "\x00\x1f\x7f\b\f\n\r\t"), ('a"b', "last")]),
        b'\x00\x01"\\\n\x7f',
        {"v6": (True, True)},
    ),
    (
        "Ü€😀\u2028",
        build_properties([("ключ", "значение 😀"), ("UNIQ_KEY", "x"), ("UNIQ_KEY", "y")]) + "\x02\x01z",
        "é😀\u2028".encode(),
        {"v2": True, "v6": (True, False)},
    ),
    ("bad\udcff", build_properties([("k", "v")]), b"ok", {}),  # a non-UTF-8 topic
    ("t", "k\x01\udce9v\x02", b"ok", {"v6": (False, True)}),  # non-UTF-8 properties
    ("t", build_properties([("k", "v")]), b"\xff\xfe body \xed\xa0\x80 \xc0\xaf", {"crc_ok": False}),
    ("t", "", b"", {}),
    ("t", "\x02\x02k\x01\x02\x01v\x02k\x01v", zlib.compress(b"zz" * 40), {"sys_flag": 0x1 | 0x4}),
    ("t", build_properties([("k", "v")]), b"not zlib", {"sys_flag": 0x1 | (2 << 8) | 0x8}),
    ("x" * 200, build_properties([("k", "v" * 300)]), bytes(range(256)), {"v2": True}),
]


def _odd_store(root: Path, odd: list = ODD) -> Path:
    """60 records of the `odd` kinds in turn in one CommitLog file (the 18th with its PHYSICALOFFSET a byte off)."""
    (root / "commitlog").mkdir(parents=True)
    data = bytearray()
    for i in range(60):
        topic, props, body, opts = odd[i % len(odd)]
        data += _record(len(data) + (1 if i == 17 else 0), topic, props, body, **opts)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(4096))
    return root


def test_generated_store_with_odd_records(tmp_path, threads, chunk_records):
    store = Store.open(_odd_store(tmp_path / "odd"))
    recs = list(store.commitlog.iter_records())
    assert len(recs) == 60 and {r.topic for r in recs} >= {"bad\udcff", "Ü€😀\u2028"}
    assert _check(store, threads=threads) > 0


def test_huge_and_empty_properties(tmp_path, threads):
    """Properties near their 32,767-byte limit: 4,000 distinct pairs with UNIQ_KEY last (the writer's
    scratch for names), the same with a name repeated at the end or bytes that are not UTF-8 at the end
    (record path), one long value full of escapes, 8,000 tiny pairs of one name; and empty ones."""
    pairs = [(f"k{i:04d}", "v") for i in range(4000)]
    props = [
        build_properties([*pairs, ("UNIQ_KEY", "U" * 40)]),
        build_properties([*pairs, ("k0000", "again")]),
        build_properties(pairs) + "\udcff",
        build_properties([("long", '"\\\n\x00é😀' * 3000)]),
        "a\x01b\x02" * 8000,
        "",
        "\x02\x01\x02",
    ]
    root = tmp_path / "huge"
    (root / "commitlog").mkdir(parents=True)
    data = bytearray()
    for p in props:
        assert len(p.encode("utf-8", "surrogateescape")) <= 32767
        data += _record(len(data), "T", p, b"body")
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(64))
    store = Store.open(root)
    for body in ("none", "text"):
        want = _record_path(store, MessageQuery(), False, body, False)
        assert _fast_path(store, MessageQuery(), False, body, False, threads) == want
    lines = want[0].splitlines()
    assert len(lines) == 7 and lines[0].count(b'": "v"') == 4000 and b'"uniq_key": "' + b"U" * 40 in lines[0]
    assert b'"properties": {}, "uniq_key": null' in lines[5] and b'"properties": {}, "uniq_key": null' in lines[6]


def test_records_that_end_the_file(tmp_path, threads):
    """Properties, a topic and a body that end where the file ends: the writer's 8-byte steps would
    read past the mapping there and go a byte at a time instead (no trailing zeros in this file)."""
    root = tmp_path / "edge"
    (root / "commitlog").mkdir(parents=True)
    data = bytearray()
    for topic, props, body in [
        ("T", "k\x01v", b"b"),
        ('T"', build_properties([("UNIQ_KEY", "u")]), b""),
        ("t", "ab\x01\x1f\u00e9", b"\x00\xe9"),
        ("t", "k\x01", b"x" * 9),
    ]:
        data += _record(len(data), topic, props, body)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data))
    store = Store.open(root)
    assert len(list(store.commitlog.iter_records())) == 4
    assert _check(store, (("none", False), ("text", False), ("hex", False)), threads=threads) > 0
    raw, _ = _fast_path(store, MessageQuery(), False, "none", False, threads)
    lines = raw.decode().splitlines()
    assert len(lines) == 4  # the 4 records written, one line each
    assert ', "properties": {"k": "v"}, "uniq_key": null,' in lines[0]
    assert ', "topic": "T\\"", "properties": {"UNIQ_KEY": "u"}, "uniq_key": "u",' in lines[1]
    assert ', "properties": {"ab": "\\u001f\u00e9"}, ' in lines[2]
    assert ', "properties": {}, "uniq_key": null,' in lines[3]  # a name without a value is left out


def _byte_store(root: Path) -> Path:
    """Every byte value at each of the 8 places of a word in a topic, a property value and a body, among
    plain ASCII ('a', '~', ' ': next to the lowest and highest bytes JSON copies as they are), and each
    byte >= 0x80 also as the second byte of a 2-byte UTF-8 sequence: what the writer copies 8 bytes a
    step, escapes or leaves to the record path (bytes that are not UTF-8)."""
    (root / "commitlog").mkdir(parents=True)
    data = bytearray()
    for byte in range(256):
        for at in range(8):
            filler = "a~ "[(byte + at) % 3]
            raw = [bytes([byte])] + ([bytes([0xC2 + (byte >> 6) % 2, 0x80 | byte & 0x3F])] if byte >= 0x80 else [])
            for r in raw:
                text = (filler * at).encode() + r + (filler * (15 - at)).encode()
                s = text.decode("utf-8", "surrogateescape")
                props = "k" + filler * at + "\x01" + s if byte not in (1, 2) else build_properties([("k", "v")])
                data += _record(len(data), s if byte else filler * 9, props, text)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(4096))
    return root


def test_every_byte_at_every_place_of_a_word(tmp_path, threads):
    """Each byte is copied as it is, escaped as json.dumps escapes it, or its row left to the record path,
    wherever it stands in an 8-byte step of the copy: the record path's bytes."""
    store = Store.open(_byte_store(tmp_path / "bytes"))
    for body in ("text", "hex", "none"):
        want = _record_path(store, MessageQuery(), False, body, False)
        assert _fast_path(store, MessageQuery(), False, body, False, threads) == want
        assert want[0].count(b"\n") == 256 * 8 + 128 * 8
    assert b'"topic": "aa\\u001faaaa' in want[0] and b'"properties": {"k ": " \\"   ' in want[0]


def test_damaged_demo(threads, torn_demo):
    assert _check(torn_demo, (("none", False), ("text", False)), threads=threads) > 0


def test_fast_query_says_which_options_fall_back():
    assert fast_query(MessageQuery(topic="t", queue_id=1, since_ms=0, limit=5), "none")
    assert fast_query(MessageQuery(), "text") and fast_query(MessageQuery(), "hex")
    assert not fast_query(MessageQuery(), "base64")
    assert not fast_query(MessageQuery(key="k"), "none")
    assert not fast_query(MessageQuery(uniq_key="k"), "none")
    assert not fast_query(MessageQuery(tag="k"), "none")
    assert not fast_query(MessageQuery(from_offset=1 << 64), "none")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--body", "none", "--topic", "DemoTopicA", "--limit", "5"],
        ["--body", "hex", "--verify"],
        ["--decompress"],
        ["--key", "order-1001"],
    ],
)
def test_cli_prints_the_record_paths_bytes(args):
    """The CLI's `messages --json` against the record path's bytes for the same query."""
    from typer.testing import CliRunner

    from mqtool.cli.app import app

    if not (DEMO / "commitlog").is_dir():
        pytest.fail("fixtures/demo is absent (a defect: it is committed)")
    conf = FIXTURES / "demo.broker.conf"
    got = CliRunner().invoke(app, ["inspect", str(DEMO), "messages", "--json", "--config", str(conf), *args])
    assert got.exit_code == 0 and got.exception is None, got.output
    opts = dict(zip(args[::2], args[1::2], strict=False))
    q = MessageQuery(
        topic=opts.get("--topic"), limit=int(opts["--limit"]) if "--limit" in opts else None, key=opts.get("--key")
    )
    want, _ = _record_path(
        Store.open(DEMO, load_broker_conf(conf)),
        q,
        "--verify" in args,
        opts.get("--body", "text"),
        "--decompress" in args,
    )
    assert got.stdout_bytes == want and want.count(b"\n") > 0


def test_without_the_extension_the_record_path_writes_every_row(tmp_path):
    """Where `mqtool._native` cannot be imported (built without a compiler), `messages --json` prints the
    same bytes, every row through the record path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys; sys.modules['mqtool._native'] = None; from mqtool.store import extension; "
        "assert extension.kernel('json_lines') is None; from mqtool.cli.app import main; "
        "sys.argv = ['mqtool', 'inspect', *sys.argv[1:]]; main()"
    )
    store = _odd_store(tmp_path / "odd")
    for args in (["--body", "text"], ["--body", "none", "--verify"]):
        cmd = [str(store), "messages", "--json", *args]
        plain = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, env=env, cwd=tmp_path)
        native = subprocess.run(
            [sys.executable, "-m", "mqtool", "inspect", *cmd], capture_output=True, env=env, cwd=tmp_path
        )
        assert plain.returncode == native.returncode  # 1 where the damaged records' errors are printed
        assert plain.stderr.endswith(native.stderr)  # and a warning that the scan runs as plain Python
        assert plain.stdout == native.stdout and plain.stdout.count(b"\n") == 60


def _damaged_demo(root: Path) -> Path:
    """The demo (46 + 20 records) with PHYSICALOFFSET and CRC/topic/property damage in every fourth
    record, its first file torn inside record 30."""
    shutil.copytree(DEMO, root)
    recs = list(Store.open(root).commitlog.iter_records())
    for f in sorted((root / "commitlog").iterdir()):
        data = bytearray(f.read_bytes())
        mine = [r for r in recs if r.file == f"commitlog/{f.name}"]
        for r in recs[3::4]:
            if r in mine:
                data[r.position + 28 + 7] ^= 1  # PHYSICALOFFSET off by one
                data[r.position + r.total_size - 40] ^= 0x55  # a byte near the end: CRC, topic or properties
        if mine[0] is recs[0]:
            cut = recs[30].position + 30
            data[cut:] = bytes(len(data) - cut)  # a torn record, then zeros
        f.write_bytes(bytes(data))
    return root


def test_threads_leave_the_findings_of_a_reader_that_stops(tmp_path, monkeypatch):
    """A consumer that closes the output early (`| head`) finds the walk's findings and file ends as
    the serial path leaves them, though the pipelined walk has gone a chunk further: at every part of
    a walk in chunks of 7 records, across a torn file end into the next file, with record-path rows
    inside chunks (damaged topics and properties)."""
    root = _damaged_demo(tmp_path / "demo")
    monkeypatch.setattr(messages, "commitlog_chunks", functools.partial(messages.commitlog_chunks, chunk_records=7))
    conf = load_broker_conf(FIXTURES / "demo.broker.conf")

    def stopped_after(rows: int, threads: bool):
        """Parts read until `rows` rows are out (a run of lines counts each line), then closed."""
        store = Store.open(root, conf)
        lines = message_lines(store, MessageQuery(), True, "text", False, threads=threads)
        out: list = []
        for p in lines:
            out += [p] if type(p) is dict else bytes(p).splitlines()
            if len(out) >= rows:
                break
        lines.close()
        return out, scan_findings(store), {k: dict(vars(v)) for k, v in store.commitlog.scans.items()}

    serial_parts = [
        p if type(p) is dict else bytes(p).count(b"\n")
        for p in message_lines(Store.open(root, conf), MessageQuery(), True, "text", False, threads=False)
    ]
    kinds = set()
    rows = 0
    for p in serial_parts:  # where a serial reader can stop: after each of its parts
        rows += 1 if type(p) is dict else p
        want = stopped_after(rows, False)
        assert len(want[0]) == rows
        assert stopped_after(rows, True) == want, rows
        kinds.add((len(want[2]), type(p).__name__, len(want[1])))
    assert {k[0] for k in kinds} == {1, 2} and {k[1] for k in kinds} == {"dict", "int"}
    assert len({k[2] for k in kinds}) > 5  # stops before and after many of the findings


def test_an_error_in_the_walk_stops_the_workers():
    """An error raised while the workers write (here by the progress callback the walk calls) reaches the
    reader, and no worker thread is left running."""
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 2:
            raise ValueError("progress failed")

    with pytest.raises(ValueError, match="progress failed"):
        for _ in message_lines(Store.open(DEMO), MessageQuery(), False, "none", False, progress, threads=True):
            pass
    assert len(calls) == 2 and not [t for t in threading.enumerate() if t.name.startswith("mqtool-lines")]


def test_an_error_in_a_worker_is_raised_to_the_reader_and_later_jobs_are_dropped():
    """A writer's error (here piece 1 of the first job) is raised where the reader waits for that job; a job
    being written when the writers are closed is finished, one not started is dropped, no worker is left."""

    class Job:
        def __init__(self, name: str) -> None:
            self.name, self.pieces, self.written = name, [0, 1], []

        def write(self, i: int) -> None:
            if (self.name, i) == ("first", 1):
                raise ValueError("piece 1 failed")
            self.written.append(i)

    writers = jsonlines._Writers()
    first, second = Job("first"), Job("second")
    gate = threading.Event()
    second.write = lambda i, w=second.write: (gate.wait(10), w(i))  # held until the reader has seen the error
    workers = [writers.submit(first), writers.submit(second)]
    with pytest.raises(ValueError, match="piece 1 failed"):
        writers.wait(workers[0])
    third = Job("third")
    writers.submit(third)
    def release() -> None:  # the second job goes on once `close` has begun (whatever the machine's load)
        while not writers._stop:
            gate.wait(0.01)
        gate.set()

    threading.Thread(target=release).start()
    writers.close()
    assert first.written == [0] and sorted(second.written) == [0, 1] and third.written == []
    assert not [t for t in threading.enumerate() if t.name.startswith("mqtool-lines")]


STALE = """
import sys, types, warnings
import mqtool
from mqtool import _native as real
stale = types.ModuleType("mqtool._native")
vars(stale).update((k, v) for k, v in vars(real).items() if k not in {lacks})
sys.modules["mqtool._native"] = {module}
del mqtool._native  # imported again (from sys.modules) by the first kernel call
warnings.simplefilter("always")
from mqtool.cli.app import main
sys.argv = ["mqtool", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    ("module", "lacks", "warning"),
    [
        (
            "stale",
            "('json_lines', 'body_crcs', 'string_hashes')",
            "mqtool's compiled extension is older than its sources (it lacks json_lines, body_crcs, string_hashes), "
            "so these run as plain Python: `messages --json`, `messages --format parquet`, the audit's string hashes. "
            "Rebuild it (pip install -e .).",
        ),
        (
            "None",
            "()",
            "mqtool's compiled extension cannot be loaded (import of mqtool._native halted; None in sys.modules), "
            "so these run as plain Python: the CommitLog scan (about 50 times slower), `messages --json`, "
            "`messages --format parquet`, the audit's string hashes, the simulator's property reader, the "
            "simulator's event log. Reinstall mqtool where a C compiler is available (pip install -e .).",
        ),
    ],
    ids=["stale", "missing"],
)
def test_a_stale_or_missing_extension_warns_once_and_the_bytes_are_the_same(module, lacks, warning):
    """An extension built before some kernels (it lacks them), or none at all: one warning in the process,
    naming what runs as plain Python (every warning shown: "always"), and `messages --json` prints the
    same bytes (a run of the demo in which the scan, the writer and the record path are all called)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    args = ["inspect", str(DEMO), "messages", "--json", "--body", "text"]
    code = STALE.format(module=module, lacks=lacks)
    got = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    want = subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True, text=True, env=env)
    assert (got.returncode, want.returncode, want.stderr) == (0, 0, "")
    assert got.stdout == want.stdout and got.stdout.count("\n") == 66
    assert got.stderr.count("RuntimeWarning") == 1 and f"RuntimeWarning: {warning}\n" in got.stderr
