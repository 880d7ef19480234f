"""The event log's writer thread: a sink with a byte buffer gets its lines from a thread of their own,
in order, with bounded blocks waiting; a failed write raises on the run's thread; nothing is left
running after `flush()`/`close()`; a text-only sink (StringIO, the --expect capture) is written directly."""

import errno
import io
import json
import threading
from pathlib import Path

import pytest
from eventrows import put_rows

from mqtool.simulate.events import FLUSH_LINES, WRITER_BLOCKS, EventLog

KEYS = ("slot", "due")


class Raw(io.RawIOBase):
    """A file that keeps what it is given, the threads that wrote it, and can fail or hold its writes."""

    def __init__(self, fail_after: int | None = None, gate: threading.Event | None = None) -> None:
        self.data = bytearray()
        self.threads: set[str] = set()
        self.writes: list[tuple[str, bytes]] = []
        self.fail_after = fail_after
        self.gate = gate

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        if self.gate is not None:
            self.gate.wait(10)
        self.threads.add(threading.current_thread().name)
        if self.fail_after is not None and len(self.data) + len(b) > self.fail_after:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.data += b
        self.writes.append((threading.current_thread().name, bytes(b)))
        return len(b)


def _sink(raw: Raw) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(raw, 1 << 12), encoding="utf-8")


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mqtool-events"]


def _rows(n: int, start: int = 0) -> list[tuple]:
    return [("T", i % 4, f"K{i}", 100 * i, None, i % 60, 5 * i) for i in range(start, start + n)]


def _want(time_of, rows) -> bytes:
    return b"".join(
        json.dumps(
            {
                "time": time_of(r),
                "service": "timer",
                "event": "deliver",
                "topic": r[0],
                "queue_id": r[1],
                "uniq_key": r[2],
                "physical_offset": r[3],
                "new_physical_offset": r[4],
                "slot": r[5],
                "due": r[6],
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for r in rows
    )


def test_many_blocks_arrive_in_order_from_the_writer_thread():
    raw = Raw()
    sink = _sink(raw)
    sink.write("before\n")  # written to the text layer first: it comes first
    log = EventLog(sink=sink, hold=False)
    rows = _rows(12 * FLUSH_LINES)  # more blocks than the writer's queue holds (WRITER_BLOCKS)
    for i in range(0, len(rows), 3):
        put_rows(log, i, "timer", "deliver", rows[i : i + 3], KEYS)
    log.batch(3000, "timer", "roll", "T", 0, "R", 1, 2, roll_times=1)  # a line of another kind after them
    log.flush()
    writes = list(raw.writes)
    sink.flush()  # the BufferedWriter's tail, from this thread
    roll = (
        b'{"time":3000,"service":"timer","event":"roll","topic":"T","queue_id":0,"uniq_key":"R",'
        b'"physical_offset":1,"new_physical_offset":2,"roll_times":1}\n'
    )
    assert bytes(raw.data) == b"before\n" + _want(lambda r: r[3] // 100 // 3 * 3, rows) + roll
    # the text before was flushed by this thread when the log found the byte buffer; the lines by the writer
    assert writes[0] == ("MainThread", b"before\n") and {w for w, _ in writes[1:]} == {"mqtool-events"}
    assert len(writes) > 12
    assert not _writers()


def test_at_most_the_bound_of_blocks_wait():
    gate = threading.Event()
    raw = Raw(gate=gate)
    log = EventLog(sink=io.TextIOWrapper(raw, encoding="utf-8", write_through=True), hold=False)
    done = []

    def produce():
        for i in range(WRITER_BLOCKS + 5):
            put_rows(log, i, "timer", "deliver", _rows(FLUSH_LINES, i), KEYS)  # a block each
            done.append(i)

    producer = threading.Thread(target=produce)
    producer.start()
    for _ in range(600):  # up to 30 s on a loaded machine: the producer fills what may wait
        if len(done) > WRITER_BLOCKS:
            break
        producer.join(0.05)
    producer.join(0.3)  # time to go past the bound, if it could
    # the writer holds one block in its write, the queue the bound: the producer waits for room
    assert len(done) == WRITER_BLOCKS + 1 and producer.is_alive()
    gate.set()
    producer.join(10)
    log.flush()
    assert len(done) == WRITER_BLOCKS + 5
    assert bytes(raw.data) == b"".join(_want(lambda r, i=i: i, _rows(FLUSH_LINES, i)) for i in range(WRITER_BLOCKS + 5))


def test_a_failed_write_raises_at_flush_and_the_thread_is_gone():
    raw = Raw(fail_after=0)
    log = EventLog(sink=io.TextIOWrapper(raw, encoding="utf-8", write_through=True), hold=False)
    put_rows(log, 1, "timer", "deliver", _rows(5), KEYS)
    with pytest.raises(OSError) as e:
        log.flush()
    assert e.value.errno == errno.ENOSPC and not _writers()
    assert raw.threads == {"mqtool-events"}
    log.close()  # raised once: nothing left to raise


def test_a_failed_write_raises_at_the_next_write_or_at_close():
    raw = Raw(fail_after=3000)  # the first block goes in part, then the disk is full
    log = EventLog(sink=io.TextIOWrapper(raw, encoding="utf-8", write_through=True), hold=False)
    with pytest.raises(OSError) as e:
        for i in range(1000):  # the run stops at a write after the failed one, not at its end
            put_rows(log, i, "timer", "deliver", _rows(FLUSH_LINES // 4, i), KEYS)
    assert e.value.errno == errno.ENOSPC and i < 1000 - 1 and not _writers()
    log.close()  # raised once: nothing left to raise
    quiet = Raw(fail_after=0)
    other = EventLog(sink=io.TextIOWrapper(quiet, encoding="utf-8", write_through=True), hold=False)
    put_rows(other, 1, "timer", "deliver", _rows(FLUSH_LINES + 1), KEYS)  # a block: handed to the thread
    with pytest.raises(OSError):
        other.close()
    assert not _writers()


def test_a_text_sink_is_written_on_the_callers_thread():
    sink = io.StringIO()
    log = EventLog(sink=sink, hold=False)
    rows = _rows(FLUSH_LINES + 20)
    put_rows(log, 0, "timer", "deliver", rows, KEYS)
    assert sink.getvalue().count("\n") == len(rows) and not _writers()  # written as it went, before any flush
    log.flush()
    log.close()
    assert sink.getvalue().encode() == _want(lambda r: 0, rows)


def test_a_full_disk_fails_the_cli_run_with_one_error_line():
    from typer.testing import CliRunner

    from conftest import FIXTURES
    from mqtool.cli.app import app

    if not Path("/dev/full").exists():
        pytest.fail("/dev/full is absent: this check needs a Linux device whose writes fail with ENOSPC")
    r = CliRunner().invoke(
        app,
        [
            "simulate",
            str(FIXTURES / "demo"),
            "--config",
            str(FIXTURES / "demo.broker.conf"),
            "--until",
            "+3h",
            "--json",
            "--events",
            "/dev/full",
        ],
    )
    assert r.exit_code == 2 and "/dev/full: cannot write the event log (No space left on device)" in r.output
    assert not _writers()
    with pytest.raises(json.JSONDecodeError):  # no summary after the failed run
        json.loads(r.stdout)
