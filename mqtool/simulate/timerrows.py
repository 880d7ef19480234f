"""`DeliveryRows`: what a plain timer delivery needs, packed in three uint64 kept beside its unit.

A timer message's record is read when it is enqueued; its delivery may come days later. Rather than
read it again then, the enqueue packs what the delivery's re-put and event need into a row that
`TimerUnits` keeps beside the unit (`extra`):

- meta = topic index + 1 (12 bits) | REAL_QID << 12 (20 bits) | UNIQ_KEY kind << 32 (2 bits) | the
  re-put's size without its topic part and the two properties the dequeue sets << 34;
- then the UNIQ_KEY: kind 1 two halves of 32 uppercase hex digits, kind 2 (format index, number) of a
  prefix and hex digits, kind 0 no UNIQ_KEY.

`NO_ROW` (all zero) where the record must be read again: a cancel marker, no REAL_TOPIC, a UNIQ_KEY of
another form, a value past the row's ranges. `delivery_size` gives what `StoreModel.plain_reput_size` takes
of the delivery from the row; `tests/simulate/test_timer_rows.py` proves both equal to the per-message path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mqtool.formats.commitlog import hosts_size
from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqtool.rules.timer import DELIVERY_SET, need_roll
from mqtool.simulate.model import _order

NO_ROW = (0, 0, 0)
META, HI, LO = 0, 1, 2  # a row's three values, as columns of an array of rows
TOPICS = (1 << 12) - 1
QIDS = 1 << 20
SIZE = 1 << 29
FORMATS = 1 << 16
_HEX_DIGITS = "0123456789ABCDEF"
# a re-put's two properties the dequeue sets: their names, separators (the value lengths are added)
_DEQ_KEYS_LEN = sum(len(k) + 2 for k in DELIVERY_SET)


def delivery_size(meta: int, enqueue_ms: int, dequeue_ms: int) -> int:
    """A delivery's re-put as `StoreModel.plain_reput_size` takes it (its properties string with the last
    separator, BODYLENGTH, the hosts), from its row's `meta`: the record's but the two properties the dequeue
    sets, plus those (`rules.timer.DELIVERY_SET`)."""
    return (meta >> 34) + _DEQ_KEYS_LEN + len(str(enqueue_ms)) + len(str(dequeue_ms))


class DeliveryRows:
    """Packs rows (`of_props`, `of_plain`, `of_plain_many`) and reads them back (`topic_qid`, `uniq_key`); it keeps the
    run's topics and UNIQ_KEY formats by index. `capacity()` is the model's HashMap capacity (`_order`)."""

    def __init__(self, capacity: Callable[[], int]) -> None:
        self._capacity = capacity
        self.topics: list[str] = []  # REAL_TOPIC by index
        self._topic_idx: dict[str, int] = {}
        self.formats: list[str] = []  # a UNIQ_KEY's "prefix%0NX" by index
        self._format_idx: dict[tuple[str, int], int] = {}
        self._keys: dict[tuple[str, ...], tuple] = {}  # `_keys_part` by the properties' keys
        self._tq: dict[tuple[str | None, str | None], int] = {}  # `_tq_meta` by (REAL_TOPIC, REAL_QID)

    def of_props(self, props: dict[str, str], body_len: int, sys_flag: int) -> tuple[int, int, int]:
        """The row of a record with these properties, BODYLENGTH and SYSFLAG, or `NO_ROW`."""
        keys = tuple(props)
        k = self._keys.get(keys)
        if k is None:
            k = self._keys_part(keys) or ()
            if len(self._keys) < FORMATS:  # a store has a few sets of property names
                self._keys[keys] = k
        if not k:
            return NO_ROW
        size, drop = k
        meta = self._meta(props.get(PROPERTY_REAL_TOPIC), props.get(PROPERTY_REAL_QUEUE_ID))
        if not meta:
            return NO_ROW
        values = "".join(props.values())  # `StoreModel.reput_size` of the values but the two the dequeue sets
        if values.isascii():
            size += len(values)
            for d in drop:
                size -= len(props[d])
        else:
            try:
                size += len(values.encode("utf-8", "surrogateescape"))
                for d in drop:
                    size -= len(props[d].encode("utf-8", "surrogateescape"))
            except UnicodeError:
                return NO_ROW  # the per-message path meets the same error
        size += body_len + hosts_size(sys_flag)
        return self._packed(meta, size, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))

    def of_plain(self, size: int, topic: str | None, qid_text: str | None, uk: str | None) -> tuple[int, int, int]:
        """`of_props` of a plain properties string (`batchread.read_plain`): `size` is already the re-put's
        without the two dequeue properties (the string's length but theirs, BODYLENGTH, the hosts)."""
        meta = self._meta(topic, qid_text)
        return self._packed(meta, size, uk) if meta else NO_ROW

    def of_plain_many(
        self,
        sizes: list[int],
        delete: list[bool],
        magic: np.ndarray,
        reals: list[str | None],
        qid_texts: list[str | None],
        uniqs: list[str | None],
    ) -> np.ndarray:
        """`of_plain` of a batch of units at once (`NO_ROW` for a ROLL or cancel unit), as uint64 rows of 3:
        the timer's enqueue of a large batch read as columns (`_plain_rows`)."""
        return _plain_rows(self, sizes, delete, magic, reals, qid_texts, uniqs)

    def topic_qid(self, meta: int) -> tuple[str, int]:
        """The REAL_TOPIC and REAL_QID a row's `meta` holds."""
        return self.topics[(meta & TOPICS) - 1], meta >> 12 & (QIDS - 1)

    def uniq_key(self, x: tuple[int, int, int]) -> str | None:
        """The UNIQ_KEY a row holds, as the record has it."""
        meta, hi, lo = x
        kind = meta >> 32 & 3
        return None if kind == 0 else f"{hi:016X}{lo:016X}" if kind == 1 else self.formats[hi] % lo

    def _meta(self, topic: str | None, qid_text: str | None) -> int:
        tq = (topic, qid_text)
        meta = self._tq.get(tq)
        if meta is None:
            meta = self._tq_meta(topic, qid_text)
            if len(self._tq) < FORMATS:
                self._tq[tq] = meta
        return meta

    def _packed(self, meta: int, size: int, uk: str | None) -> tuple[int, int, int]:
        """The row of `meta` and a re-put `size` with its UNIQ_KEY packed, `NO_ROW` where the size is out
        of range or the UNIQ_KEY of another form."""
        if not 0 <= size < SIZE:
            return NO_ROW
        if uk is None:
            return meta | size << 34, 0, 0
        prefix = uk.rstrip(_HEX_DIGITS)  # "%0NX" % int(digits, 16) gives the digits back (N their count)
        if not prefix and len(uk) == 32:
            return meta | 1 << 32 | size << 34, int(uk[:16], 16), int(uk[16:], 16)
        if len(uk) - len(prefix) > 16:
            prefix = uk[:-16]
        width = len(uk) - len(prefix)
        if not width:
            return NO_ROW
        f = self._format_idx.get((prefix, width))
        if f is None:
            if len(self.formats) >= FORMATS:
                return NO_ROW
            f = self._format_idx[(prefix, width)] = len(self.formats)
            self.formats.append(f"{prefix.replace('%', '%%')}%0{width}X")
        return meta | 2 << 32 | size << 34, f, int(uk[len(prefix) :], 16)

    def _keys_part(self, keys: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
        """(the size of the keys and separators of a re-put with these properties but the two `convert` sets on a
        delivery (`DELIVERY_SET`), those of the two it has), None for a cancel marker."""
        if PROPERTY_TIMER_DEL_UNIQKEY in keys:
            return None
        try:
            _stored, keys_len = _order(keys, self._capacity())
        except UnicodeError:
            return None
        drop = tuple(k for k in DELIVERY_SET if k in keys)
        return keys_len + 2 * len(keys) - sum(len(k) + 2 for k in drop), drop

    def _tq_meta(self, topic: str | None, qid_text: str | None) -> int:
        """The row's topic index + 1 and REAL_QID bits, 0 where the row cannot hold them."""
        if topic is None:
            return 0
        try:
            qid = int(qid_text)
        except (TypeError, ValueError):
            qid = 0
        if not 0 <= qid < QIDS:
            return 0
        ti = self._topic_idx.get(topic)
        if ti is None:
            if len(self.topics) >= TOPICS:
                return 0
            ti = self._topic_idx[topic] = len(self.topics)
            self.topics.append(topic)
        return (ti + 1) | qid << 12


_HEX_NIBBLE = np.full(256, 16, np.uint64)  # an uppercase hex digit's value, 16 for any other byte
_HEX_NIBBLE[np.frombuffer(b"0123456789ABCDEF", np.uint8)] = np.arange(16, dtype=np.uint64)
_NIBBLE_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)
_UK32 = np.arange(32)


def _plain_rows(
    rows: DeliveryRows,
    sizes: list[int],
    delete: list[bool],
    magic: np.ndarray,
    reals: list[str | None],
    qid_texts: list[str | None],
    uniqs: list[str | None],
) -> np.ndarray:
    """`DeliveryRows.of_plain_many`'s work: `of_plain` of each unit (`NO_ROW` for a ROLL or cancel unit), as
    uint64 rows of 3, by numpy: the meta of each distinct (REAL_TOPIC, REAL_QID), the sizes' range, a UNIQ_KEY
    of 32 uppercase hex digits parsed for all at once (kind 1) or none (kind 0); any other UNIQ_KEY by
    `_packed` itself."""
    n = len(sizes)
    # each (REAL_TOPIC, REAL_QID) in the order of its first unit: topics get their indices as `of_plain` gives them
    tq = {key: rows._meta(*key) for key in dict.fromkeys(zip(reals, qid_texts, strict=True))}
    meta = np.fromiter(map(tq.__getitem__, zip(reals, qid_texts, strict=True)), np.uint64, n)
    size = np.array(sizes, np.int64)
    ok = ~need_roll(magic) & ~np.array(delete, bool) & (meta != 0) & (size >= 0) & (size < SIZE)
    uks = [u or "" for u in uniqs]  # a plain string's values are never empty
    lens = np.fromiter(map(len, uks), np.int64, n)
    head = meta | (np.maximum(size, 0).astype(np.uint64) << np.uint64(34))
    extra = np.zeros((n, 3), np.uint64)
    extra[:, META] = head
    raw = "".join(uks).encode("utf-8", "surrogateescape")
    hexed = np.zeros(n, bool)
    if len(raw) == int(lens.sum()):  # one byte a character: a key's bytes lie where its characters do
        k32 = np.flatnonzero(ok & (lens == 32))
        if len(k32):
            at = (np.cumsum(lens) - lens)[k32]
            nib = _HEX_NIBBLE[np.frombuffer(raw, np.uint8)[at[:, None] + _UK32]]
            good = (nib < 16).all(axis=1)
            k32, nib = k32[good], nib[good]
            extra[k32, META] |= np.uint64(1 << 32)
            extra[k32, HI] = (nib[:, :16] << _NIBBLE_SHIFTS).sum(axis=1, dtype=np.uint64)
            extra[k32, LO] = (nib[:, 16:] << _NIBBLE_SHIFTS).sum(axis=1, dtype=np.uint64)
            hexed[k32] = True
        _prefixed_rows(
            rows,
            np.frombuffer(raw, np.uint8),
            np.cumsum(lens) - lens,
            lens,
            ok & ~hexed & (lens != 0),
            uks,
            extra,
            hexed,
        )
    extra[~ok] = 0
    packed = rows._packed
    for k in np.flatnonzero(ok & ~hexed & (lens != 0)).tolist():  # a UNIQ_KEY of another form
        extra[k] = packed(int(meta[k]), sizes[k], uniqs[k])
    return extra


_J16 = np.arange(16)


def _prefixed_rows(
    rows: DeliveryRows,
    raw: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    which: np.ndarray,
    uks: list[str],
    extra: np.ndarray,
    done: np.ndarray,
) -> None:
    """`_packed`'s kind 2 for the UNIQ_KEYs `which` (ASCII, their characters at `starts` in `raw`): the
    trailing uppercase hex digits (16 at most) as a number, the prefix before them (16 bytes at most
    here) by its format index, registered once per distinct (prefix, digits) in the order of the first
    key of each (as `_packed` key by key would); `done` marks the rows written."""
    ks = np.flatnonzero(which)
    if not len(ks):
        return
    length, at = lens[ks], starts[ks]
    inwin = _J16 >= 16 - length[:, None]  # the last 16 characters (fewer in a shorter key)
    nib = np.where(inwin, _HEX_NIBBLE[raw[np.where(inwin, at[:, None] + length[:, None] - 16 + _J16, 0)]], 16)
    digits = np.cumprod(nib[:, ::-1] < 16, axis=1).sum(axis=1)  # the trailing run, 16 at most
    value = (np.where(_J16 >= 16 - digits[:, None], nib, 0) << _NIBBLE_SHIFTS).sum(axis=1, dtype=np.uint64)
    plen = length - digits
    fit = (plen <= 16) & (digits > 0)
    ks, plen, digits, value, at = ks[fit], plen[fit], digits[fit], value[fit], at[fit]
    if not len(ks):
        return
    inpre = _J16 < plen[:, None]
    prefix = np.where(inpre, raw[np.where(inpre, at[:, None] + _J16, 0)], 0).astype(np.uint8)
    key = np.column_stack([plen, digits, np.ascontiguousarray(prefix).view(np.int64)])
    if (key == key[0]).all():  # one prefix and width (a producer's keys): no sort
        first, inverse = np.zeros(1, np.int64), np.zeros(len(key), np.int64)
    else:
        _keys, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    fmt = np.full(len(first), -1, np.int64)
    packed = rows._packed
    for g in np.argsort(first, kind="stable").tolist():  # registered in the order of their first keys
        x = packed(0, 0, uks[int(ks[first[g]])])
        meta, f_idx, _value = x
        if meta >> 32 & 3 == 2:
            fmt[g] = f_idx
    f = fmt[inverse.reshape(-1)]
    good = f >= 0
    ks = ks[good]
    extra[ks, META] |= np.uint64(2 << 32)
    extra[ks, HI] = f[good].astype(np.uint64)
    extra[ks, LO] = value[good]
    done[ks] = True
