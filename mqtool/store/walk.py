"""The CommitLog walk of `fastscan`, written once: what it reads (`LAYOUT`, `commitlog_record`'s numbers),
what it writes (`COLUMNS`), why it stops (the stop codes), and the walk itself as plain Python.

The plain walk is the reference of the compiled one and its fallback: `mqtool._native.CommitLogWalk`
(`mqtool/_kernels/scan.pxi`) is this walk in Cython, check by check in the same order, given these
constants by name; `fastscan` runs it, and runs this one only where the extension cannot be imported
(after one warning). `tests/store/test_fastscan.py` runs both on every case. The plain walk reads the
record through a memoryview.
"""

from __future__ import annotations

import zlib

from mqtool.formats import record_layout as cl
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6

# ===================================================================== what the walk reads, writes and reports
# Column rows of a chunk (int64 each); positions are file positions (index into the mapping).
COLUMNS = (
    "pos", "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
    "physical_offset_field", "sys_flag", "born_timestamp", "born_host_pos", "born_port",
    "store_timestamp", "store_host_pos", "store_port", "reconsume_times", "prepared_transaction_offset",
    "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len", "computed_crc",
)
(C_POS, C_TOTAL, C_MAGIC, C_BODY_CRC, C_QUEUE_ID, C_FLAG, C_QUEUE_OFFSET, C_PHYS_FIELD, C_SYS_FLAG,
 C_BORN_TS, C_BORN_HOST, C_BORN_PORT, C_STORE_TS, C_STORE_HOST, C_STORE_PORT, C_RECONSUME, C_PREPARED,
 C_BODY_POS, C_BODY_LEN, C_TOPIC_POS, C_TOPIC_LEN, C_PROPS_POS, C_PROPS_LEN, C_CRC) = range(len(COLUMNS))
NCOL = len(COLUMNS)

# Why a chunk ended. MORE: the chunk is full, call again from `pos`.
STOP_MORE, STOP_END_OF_FILE, STOP_BLANK, STOP_ZERO_TAIL = 0, 1, 2, 3
# Invalid records (a torn tail); `detail` holds the bad value where the message shows one.
(BAD_HEADER, BAD_MAGIC, BAD_BODY_NEG, BAD_BODY_PAST, BAD_TOPIC_LEN_PAST, BAD_TOPIC_NEG, BAD_TOPIC_PAST,
 BAD_PROPS_LEN_PAST, BAD_PROPS_NEG, BAD_PROPS_PAST, BAD_SIZE) = range(10, 21)


_V1, _V2, _BLANK = cl.MESSAGE_MAGIC_CODE, cl.MESSAGE_MAGIC_CODE_V2, cl.BLANK_MAGIC_CODE
_BORN_V6, _STORE_V6 = BORNHOST_V6, STOREHOST_V6


def _kernel_layout() -> tuple[int, ...]:
    """The offsets and widths the kernel reads, `commitlog_record`'s (`formats/record_layout.py`; see `LAYOUT_NAMES`).

    Each field must have the width of the reader the kernel uses for it (`_i32`, `_i64`, ...):
    a definition that changes a width fails here, at import, instead of misreading records.
    """
    head = {f.name: f for f in cl.HEADER}
    tail = {f.name: f for f in cl.AFTER_STORE_HOST}
    widths = {"total_size": 4, "magic_code": 4, "body_crc": 4, "queue_id": 4, "flag": 4, "queue_offset": 8,
              "physical_offset": 8, "sys_flag": 4, "born_timestamp": 8, "reconsume_times": 4,
              "prepared_transaction_offset": 8, "body_length": 4}
    for name, width in widths.items():
        assert (head.get(name) or tail[name]).size == width, name
    assert [f.size for f in cl.AFTER_BORN_HOST] == [8] and cl.HOST_PORT_SIZE == 4
    assert (cl.TOPIC_LENGTH_V1.size, cl.TOPIC_LENGTH_V2.size, cl.PROPERTIES_LENGTH.size) == (1, 2, 2)
    return (
        head["total_size"].offset, head["magic_code"].offset, head["body_crc"].offset, head["queue_id"].offset,
        head["flag"].offset, head["queue_offset"].offset, head["physical_offset"].offset,
        head["sys_flag"].offset, head["born_timestamp"].offset, cl.size(cl.HEADER),
        cl.HOST_SIZE_V4 - cl.HOST_PORT_SIZE, cl.HOST_SIZE_V6 - cl.HOST_PORT_SIZE, cl.HOST_PORT_SIZE,
        cl.size(cl.AFTER_BORN_HOST), tail["reconsume_times"].offset,
        tail["prepared_transaction_offset"].offset, tail["body_length"].offset, cl.size(cl.AFTER_STORE_HOST),
        cl.TOPIC_LENGTH_V1.size, cl.TOPIC_LENGTH_V2.size, cl.PROPERTIES_LENGTH.size, cl.FIXED_SIZE,
    )


LAYOUT_NAMES = (
    "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
    "born_timestamp", "header_size", "address_v4", "address_v6", "port_size", "store_timestamp_size",
    "reconsume_times", "prepared_transaction_offset", "body_length", "tail_size", "topic_length_v1",
    "topic_length_v2", "properties_length", "fixed_size",
)
LAYOUT = _kernel_layout()


KERNEL_CODES = {"message_v1": _V1, "message_v2": _V2, "blank": _BLANK, "born_host_v6": _BORN_V6,
                "store_host_v6": _STORE_V6}
"""The magic codes and sysflag bits the walk tells records by (given to the compiled walk by name)."""
STOP_CODES = {name: value for name, value in globals().items() if name.startswith(("STOP_", "BAD_"))}



# ===================================================================== the walk


def _u32(a, p):
    return int.from_bytes(a[p : p + 4], "big")


def _i32(a, p):
    return int.from_bytes(a[p : p + 4], "big", signed=True)


def _i64(a, p):
    return int.from_bytes(a[p : p + 8], "big", signed=True)


def _i16(a, p):
    return int.from_bytes(a[p : p + 2], "big", signed=True)


def _i8(a, p):
    v = a[p]
    return v - 256 if v >= 128 else v


def _body_crc(a, p, n):
    return zlib.crc32(a[p : p + n]) & 0x7FFFFFFF


def _sized(a, p, size, width, bad_width, bad_neg, bad_past):
    """A length of `width` bytes at `p` (1: a signed byte, the V1 topic; 2: a short) and the bytes it
    counts, checked as `decode_message` does: (STOP_MORE, length), or (the stop, its detail)."""
    if p + width > size:
        return bad_width, 0
    n = _i8(a, p) if width == 1 else _i16(a, p)
    if n < 0:
        return bad_neg, n
    if p + width + n > size:
        return bad_past, 0
    return STOP_MORE, n


class TopicTable:
    """Each distinct topic (its bytes) numbered in order of first appearance: `names[i]` is topic i.

    The walk gives every record it accepts its topic's number (`ids[n]`), so an aggregating view
    (`inspect/columns.py`) needs no pass of its own over the topics. The reference of the extension's
    `TopicTable`; one walk at a time may use a table."""

    def __init__(self) -> None:
        self.names: list[bytes] = []
        self._ids: dict[bytes, int] = {}

    def id(self, raw: bytes) -> int:
        """The number of a topic, a new one for a topic not seen before."""
        i = self._ids.get(raw)
        if i is None:
            i = self._ids[raw] = len(self.names)
            self.names.append(raw)
        return i


def commitlog_kernel(a, pos, verify_crc, out, lay, topics: TopicTable | None = None, ids=None):
    """Scan records from `pos` into `out[:, :n]`; returns (n, pos, stop, detail).

    Mirrors `CommitLog._walk` + `decode_message` check by check, in the same order. `lay` is
    `LAYOUT`: every offset and width is `commitlog_record`'s. With `topics`, `ids[n]` is
    the topic number of record n (`TopicTable.id`).
    """
    (o_total, o_magic, o_crc, o_qid, o_flag, o_qoff, o_phys, o_sysflag, o_born_ts, head, addr_v4, addr_v6,
     port, store_ts_size, o_reconsume, o_prepared, o_body_len, tail, topic_v1, topic_v2, props_width,
     fixed) = lay
    size = a.shape[0]
    cap = out.shape[1]
    n = 0
    while True:
        if n == cap:
            return n, pos, STOP_MORE, 0
        if pos + o_magic + 4 > size:
            return n, pos, STOP_END_OF_FILE, 0
        total = _i32(a, pos + o_total)
        magic = _i32(a, pos + o_magic)
        if magic == _BLANK:
            return n, pos, STOP_BLANK, total
        if total == 0 and magic == 0:
            return n, pos, STOP_ZERO_TAIL, 0
        if pos + head > size:
            return n, pos, BAD_HEADER, 0
        if magic != _V1 and magic != _V2:
            return n, pos, BAD_MAGIC, magic
        sys_flag = _i32(a, pos + o_sysflag)
        born_v6 = (sys_flag & _BORN_V6) != 0
        store_v6 = (sys_flag & _STORE_V6) != 0
        born_addr = addr_v6 if born_v6 else addr_v4
        store_addr = addr_v6 if store_v6 else addr_v4
        p = pos + head
        if p + born_addr + port + store_ts_size + store_addr + port > size:
            return n, pos, BAD_HEADER, 0
        born_host = p
        born_port = _i32(a, p + born_addr)
        p += born_addr + port
        store_ts = _i64(a, p)
        p += store_ts_size
        store_host = p
        store_port = _i32(a, p + store_addr)
        p += store_addr + port
        if p + tail > size:
            return n, pos, BAD_HEADER, 0
        reconsume = _i32(a, p + o_reconsume)
        prepared = _i64(a, p + o_prepared)
        body_len = _i32(a, p + o_body_len)
        p += tail
        if body_len < 0:
            return n, pos, BAD_BODY_NEG, body_len
        if p + body_len > size:
            return n, pos, BAD_BODY_PAST, 0
        body_pos = p
        p += body_len
        topic_width = topic_v2 if magic == _V2 else topic_v1
        stop, topic_len = _sized(a, p, size, topic_width, BAD_TOPIC_LEN_PAST, BAD_TOPIC_NEG, BAD_TOPIC_PAST)
        if stop != STOP_MORE:
            return n, pos, stop, topic_len
        topic_pos = p + topic_width
        p = topic_pos + topic_len
        stop, props_len = _sized(a, p, size, props_width, BAD_PROPS_LEN_PAST, BAD_PROPS_NEG, BAD_PROPS_PAST)
        if stop != STOP_MORE:
            return n, pos, stop, props_len
        p += props_width
        computed = (fixed + born_addr + port + store_addr + port + body_len + (topic_v2 if magic == _V2 else topic_v1)
                    + topic_len + props_len)
        if total != computed or total <= 0:
            return n, pos, BAD_SIZE, computed
        crc = -1
        if verify_crc and body_len > 0:
            crc = _body_crc(a, body_pos, body_len)
        out[C_POS, n] = pos
        out[C_TOTAL, n] = total
        out[C_MAGIC, n] = magic
        out[C_BODY_CRC, n] = _i32(a, pos + o_crc)
        out[C_QUEUE_ID, n] = _i32(a, pos + o_qid)
        out[C_FLAG, n] = _i32(a, pos + o_flag)
        out[C_QUEUE_OFFSET, n] = _i64(a, pos + o_qoff)
        out[C_PHYS_FIELD, n] = _i64(a, pos + o_phys)
        out[C_SYS_FLAG, n] = sys_flag
        out[C_BORN_TS, n] = _i64(a, pos + o_born_ts)
        out[C_BORN_HOST, n] = born_host
        out[C_BORN_PORT, n] = born_port
        out[C_STORE_TS, n] = store_ts
        out[C_STORE_HOST, n] = store_host
        out[C_STORE_PORT, n] = store_port
        out[C_RECONSUME, n] = reconsume
        out[C_PREPARED, n] = prepared
        out[C_BODY_POS, n] = body_pos
        out[C_BODY_LEN, n] = body_len
        out[C_TOPIC_POS, n] = topic_pos
        out[C_TOPIC_LEN, n] = topic_len
        out[C_PROPS_POS, n] = p
        out[C_PROPS_LEN, n] = props_len
        out[C_CRC, n] = crc
        if topics is not None:
            ids[n] = topics.id(bytes(a[topic_pos : topic_pos + topic_len]))
        n += 1
        pos += total
