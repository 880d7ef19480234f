"""`read_sources`: the store's records a timer slot rolls, read batch-wise without building them.

A roll slot of a long run holds a third of its timer messages (every record enqueued at the start
with a due time past the roll window lands in the same slot). `TimerService._roll` re-puts each to
its own topic and queue with three properties set; a record kept as a row (`_roll_row`) needs only
its topic, QUEUEID, the length of its properties string, BODYLENGTH, SYSFLAG and a few values. This
reads those with `batchread.read_plain`'s checks and its templates (one regular-expression match a
plain properties string, no map), plus the topic and QUEUEID `read_plain` does not give.
"""

from __future__ import annotations

import bisect

from mqtool.formats.message import _HEAD, _PROPS_LEN, _TAIL, _TOPIC_LEN
from mqtool.simulate import batchread, plainscan
from mqtool.simulate.diskread import fast_properties

CHUNK = 4096  # records one span holds at most
_HEAD_SIZE = _HEAD.size


def read_sources(base, phys: list[int], sizes: list[int], wanted: tuple[str, ...]) -> list[tuple | None]:
    """For the record at each `phys` (`sizes` bound the read; `batchread.batchable(base)` holds):
    `(topic bytes, QUEUEID, n, values)` where its properties string is plain (`read_plain`'s `n` and
    `values`: the string's length with its last separator plus BODYLENGTH and the hosts, the wanted
    keys' values as bytes), else None (the record is read whole). The records are taken in runs that
    lie in one file within `MAX_SPAN` bytes."""
    out: list[tuple | None] = [None] * len(phys)
    starts = base._starts
    i = 0
    while i < len(phys):
        lo = phys[i]
        f = bisect.bisect_right(starts, lo) - 1
        end = starts[f + 1] if f + 1 < len(starts) else 1 << 62
        j = i + 1
        while j < len(phys) and j - i < CHUNK and lo <= phys[j] < end and phys[j] + sizes[j] - lo <= batchread.MAX_SPAN:
            j += 1
        _read_run(base, phys, sizes, i, j, wanted, out)
        i = j
    return out


def _read_run(base, phys: list[int], sizes: list[int], i: int, j: int, wanted: tuple[str, ...],
              out: list[tuple | None]) -> None:
    """`read_sources` of records [i, j), which lie in one file."""
    span = batchread._open_span(base, phys[i:j], sizes[i:j])
    if span is None:
        return
    buf, delta, rels, n, flen = span
    templates = batchread._TEMPLATES.setdefault(wanted, [])  # shared with `read_plain`, looked up now
    last = templates[0] if templates else None
    head, no_hosts, tail_end = _HEAD_SIZE, plainscan.NO_HOSTS, plainscan.tail_end
    unpack_head, tail_of, props_len_of = _HEAD.unpack_from, _TAIL.unpack_from, _PROPS_LEN.unpack_from
    try:
        for k, rel in enumerate(rels, i):
            if rel >= flen or rel + head > n:
                continue
            r = rel + delta
            total, magic, _crc, qid, _flag, _qoff, _phys, sysflag, _born = unpack_head(buf, r)
            after_tail = tail_end(rel, total, magic, sysflag, n)
            if after_tail < 0:
                continue
            hosts = after_tail - no_hosts
            body_len = tail_of(buf, r + after_tail - _TAIL.size)[2]
            after_body = after_tail + body_len
            if body_len < 0 or after_body > total:
                continue
            tl = _TOPIC_LEN[magic]
            try:
                (topic_len,) = tl.unpack_from(buf, r + after_body)
                topic_at = r + after_body + tl.size
                (props_len,) = props_len_of(buf, topic_at + topic_len)
            except Exception:  # noqa: BLE001 - past the bytes: read whole
                continue
            props_at = after_body + tl.size + topic_len
            if topic_len < 0 or props_len < 0 or props_at + _PROPS_LEN.size + props_len > total:
                continue
            b = r + props_at + _PROPS_LEN.size
            e = b + props_len
            m = last.pattern.fullmatch(buf, b, e) if last is not None else None
            if m is None:
                m, last = batchread.search_templates(templates, last, buf, b, e)
            if m is None and len(templates) < batchread.MAX_TEMPLATES:
                raw = bytes(buf[b:e]).decode("utf-8", "surrogateescape")
                t = batchread._plain_template(raw, fast_properties(raw), wanted)
                if t is not None:
                    templates.append(t)
                    last = t
                    m = t.pattern.fullmatch(buf, b, e)
            if m is not None:
                out[k] = (bytes(buf[topic_at:topic_at + topic_len]), qid, props_len + last.pad + body_len + hosts,
                          m.group(*last.groups))
    finally:
        batchread._close(buf)
