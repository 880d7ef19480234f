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

from mqtool.formats.commitlog import hosts_size
from mqtool.formats.names import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from mqtool.formats.properties import key_order
from mqtool.rules.timer import DELIVERY_SET

NO_ROW = (0, 0, 0)
TOPICS = (1 << 12) - 1
QIDS = 1 << 20
SIZE = 1 << 29
FORMATS = 1 << 16
_HEX_DIGITS = "0123456789ABCDEF"
# a re-put's two properties the dequeue sets: their names, separators (the value lengths are added)
_DEQ_KEYS_LEN = sum(len(k) + 2 for k in DELIVERY_SET)


def utf8_len(value: str) -> int:
    """A properties text's length as the CommitLog holds it (UTF-8, surrogates escaped); `UnicodeError` where
    `StoreModel.append` meets it too."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogateescape"))


def delivery_size(meta: int, enqueue_ms: int, dequeue_ms: int) -> int:
    """A delivery's re-put as `StoreModel.plain_reput_size` takes it (its properties string with the last
    separator, BODYLENGTH, the hosts), from its row's `meta`: the record's but the two properties the dequeue
    sets, plus those (`rules.timer.DELIVERY_SET`)."""
    return (meta >> 34) + _DEQ_KEYS_LEN + len(str(enqueue_ms)) + len(str(dequeue_ms))


class DeliveryRows:
    """Packs rows (`of_props`, `of_plain`: n >= 1 at once) and reads them back (`topic_qid`, `uniq_key`); it keeps the
    run's topics and UNIQ_KEY formats by index. `capacity()` is the model's HashMap capacity (`key_order`)."""

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
        try:  # `StoreModel.reput_size` of the values but the two the dequeue sets
            size += utf8_len("".join(props.values())) - sum(utf8_len(props[d]) for d in drop)
        except UnicodeError:
            return NO_ROW  # the per-message path meets the same error
        size += body_len + hosts_size(sys_flag)
        topic, qid = props.get(PROPERTY_REAL_TOPIC), props.get(PROPERTY_REAL_QUEUE_ID)
        (row,) = self.of_plain([size], [topic], [qid], [props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)])
        return row

    def of_plain(self, sizes: list[int], topics: list, qid_texts: list, uks: list) -> list[tuple[int, int, int]]:
        """The rows of n >= 1 records, each `NO_ROW` where the size is out of range, the REAL_TOPIC and
        REAL_QID do not fit or the UNIQ_KEY is of another form: `sizes` are the re-puts' without the two
        dequeue properties (a plain string's length but theirs, BODYLENGTH, the hosts: `batchread.read_plain`)."""
        tq, formats = self._tq, self._format_idx
        rows = []
        for size, topic, qid_text, uk in zip(sizes, topics, qid_texts, uks, strict=True):
            meta = tq.get((topic, qid_text))
            if meta is None:
                meta = self._meta(topic, qid_text)
            if not meta or not 0 <= size < SIZE:
                rows.append(NO_ROW)
                continue
            meta |= size << 34
            if uk is None:
                rows.append((meta, 0, 0))
                continue
            prefix = uk.rstrip(_HEX_DIGITS)  # "%0NX" % int(digits, 16) gives the digits back (N their count)
            if not prefix and len(uk) == 32:
                rows.append((meta | 1 << 32, int(uk[:16], 16), int(uk[16:], 16)))
                continue
            if len(uk) - len(prefix) > 16:
                prefix = uk[:-16]
            width = len(uk) - len(prefix)
            f = formats.get((prefix, width))
            if f is None:
                f = self._format(prefix, width)
            rows.append(NO_ROW if f is None else (meta | 2 << 32, f, int(uk[len(prefix) :], 16)))
        return rows

    def topic_qid(self, meta: int) -> tuple[str, int]:
        """The REAL_TOPIC and REAL_QID a row's `meta` holds."""
        return self.topics[(meta & TOPICS) - 1], meta >> 12 & (QIDS - 1)

    def uniq_key(self, x: tuple[int, int, int]) -> str | None:
        """The UNIQ_KEY a row holds, as the record has it."""
        meta, hi, lo = x
        kind = meta >> 32 & 3
        return None if kind == 0 else f"{hi:016X}{lo:016X}" if kind == 1 else self.formats[hi] % lo

    def _format(self, prefix: str, width: int) -> int | None:
        """A UNIQ_KEY's format index, registered on first use; None for no digits or past `FORMATS`."""
        if not width or len(self.formats) >= FORMATS:
            return None
        f = self._format_idx[(prefix, width)] = len(self.formats)
        self.formats.append(f"{prefix.replace('%', '%%')}%0{width}X")
        return f

    def _keys_part(self, keys: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
        """(the size of the keys and separators of a re-put with these properties but the two `convert` sets on a
        delivery (`DELIVERY_SET`), those of the two it has), None for a cancel marker."""
        if PROPERTY_TIMER_DEL_UNIQKEY in keys:
            return None
        try:
            _stored, keys_len = key_order(keys, self._capacity())
        except UnicodeError:
            return None
        drop = tuple(k for k in DELIVERY_SET if k in keys)
        return keys_len + 2 * len(keys) - sum(len(k) + 2 for k in drop), drop

    def _meta(self, topic: str | None, qid_text: str | None) -> int:
        """The row's topic index + 1 and REAL_QID bits, 0 where the row cannot hold them (kept by the texts)."""
        try:
            qid = int(qid_text)
        except (TypeError, ValueError):
            qid = 0
        ti = self._topic_idx.get(topic)
        if ti is None and topic is not None and 0 <= qid < QIDS and len(self.topics) < TOPICS:
            ti = self._topic_idx[topic] = len(self.topics)
            self.topics.append(topic)
        meta = 0 if ti is None or not 0 <= qid < QIDS else (ti + 1) | qid << 12
        if len(self._tq) < FORMATS:
            self._tq[(topic, qid_text)] = meta
        return meta
