"""The simulator's batch reads of the store's own records (a timer enqueue's run, a delay level's due prefix,
a roll slot's sources): one `RecordFiles.span` read and one `propscan.scan` pass checking every header and
matching every properties string against the plain key sequences (templates, the base's: a new base learns
anew) seen so far. A string no template matches is parsed and may make a template for the records after it.
Whatever the checks refuse is answered None: the caller reads it through `StoreModel`, which decides.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.properties import parse_properties
from mqtool.simulate.diskread import MappedBase
from mqtool.store import propscan
from mqtool.store.recordfiles import close_span as close

MAX_TEMPLATES = 32  # plain key sequences remembered per set of wanted keys


def batchable(base) -> bool:
    """A base whose records can be read batch-wise: a `MappedBase` of a normal-mode store seen as
    scanned (no recovery cut: a record past the recovered end reads as absent)."""
    return isinstance(base, MappedBase) and base.recovery is None and not base.dledger


def scan_plain(base: MappedBase, phys: list[int], sizes: list[int], wanted: tuple[str, ...], learn_self=False):
    """The records at `phys` (ConsumeQueue `sizes` bound the read) as `propscan`'s columns: (the span's bytes
    or mapping, `out`, {k: `(properties map, BODYLENGTH, SYSFLAG)`} of the records no template matches), or
    None when they cannot be read batch-wise; with `learn_self` a record that makes a template is matched against
    it too. The caller closes the bytes (`close`)."""
    span = base.files.span(phys, sizes)
    if span is None:
        return None
    buf, delta, rels, n, flen = span
    book = base.templates.get(wanted)
    if book is None:
        book = base.templates[wanted] = propscan.Templates(len(wanted))
    answers: dict[int, tuple] = {}
    try:
        r = np.array(rels, np.int64)
        out, k, last = propscan.scan(buf, r, delta, n, flen, book)
        while k < len(rels):  # a record no template matches
            body_len, sysflag, b, e = out[k, propscan.BODY_LENGTH : propscan.PROPS_END + 1].tolist()
            raw = buf[b:e].decode("utf-8", "surrogateescape")
            props = parse_properties(raw)
            answers[k] = (props, body_len, sysflag)
            t = propscan.template_of(raw, props, wanted) if len(book.list) < MAX_TEMPLATES else None
            at = k if learn_self else k + 1
            nxt = -1
            if t is not None and at < len(rels):  # the records after it are matched against it too
                book.add(t)
                again, unmatched, again_last = propscan.scan(buf, r[at:], delta, n, flen, book)
                out[at:] = again
                last = again_last if again_last >= 0 else last  # (a row matched before matches again)
                nxt = at + unmatched
            elif t is not None:
                book.add(t)
            if nxt <= k:
                left = np.flatnonzero(out[k + 1 :, propscan.STATUS] == 0)
                nxt = k + 1 + int(left[0]) if len(left) else len(rels)
            k = nxt
        if last >= 0:
            book.first(last)
    except BaseException:
        close(buf)
        raise
    return buf, out, answers


def read_plain(
    base: MappedBase, phys: list[int], sizes: list[int], wanted: tuple[str, ...], sources: bool = False
) -> list[tuple | None]:
    """`scan_plain`'s answers as tuples, one a record: a matched (plain) string `(n, values)`, `values` the
    UTF-8 bytes of the `wanted` keys' values (None: absent; a tuple for two keys or more) and `n` the
    re-put's bytes besides its topic's fixed part (column 1: every property is kept, so `props_length` of
    the map is the string's own length); any other string `(properties map, BODYLENGTH, SYSFLAG)`; None
    where the per-message read decides.

    With `sources` (a roll slot's sources): `(topic bytes, QUEUEID, n, values)` for a plain
    string, `values` always a tuple, else None (the record is read whole); the records are taken in runs
    that lie in one file within `MAX_SPAN` bytes, and a record that makes a template is matched by it."""
    res: list[tuple | None] = [None] * len(phys)
    for i, j in base.files.runs(phys, sizes) if sources else [(0, len(phys))]:
        scanned = scan_plain(base, phys[i:j], sizes[i:j], wanted, sources)
        if scanned is None:
            continue
        buf, out, answers = scanned
        try:
            for k, status in enumerate(out[:, propscan.STATUS].tolist()):
                if status == 1 and sources:
                    n, values = propscan.answer(out, k, buf, len(wanted), True)
                    row = out[k].tolist()
                    topic = buf[row[propscan.TOPIC_START] : row[propscan.TOPIC_END]]
                    res[i + k] = (topic, row[propscan.QUEUE_ID], n, values)
                elif status == 1:
                    res[i + k] = propscan.answer(out, k, buf, len(wanted))
                elif status == 0 and not sources:
                    res[i + k] = answers[k]
        finally:
            close(buf)
    return res
