# The CommitLog scan's kernels (`store/fastscan.py`): the walk with CRC verification, the Arrow gather,
# the properties' pairs and the IPv4 host keys. Their plain-Python references are `store/walk.py`
# (`_commitlog_kernel`) and `store/kernels.py`; `tests/store/test_fastscan.py` runs both on every case.
# Nothing here restates the record layout: `CommitLogWalk` is given every offset, width, magic code,
# flag, column number and stop code by `fastscan` (from the Construct definition), once per process.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize


cdef extern from *:
    """
    #define mq_prefetch(p) __builtin_prefetch((const void *)(p))
    """
    void mq_prefetch(const void *p) noexcept nogil


cdef inline int64_t _u32(const uint8_t *a, int64_t p) noexcept nogil:
    return (<int64_t>a[p] << 24) | (<int64_t>a[p + 1] << 16) | (<int64_t>a[p + 2] << 8) | <int64_t>a[p + 3]


cdef inline int64_t _i32(const uint8_t *a, int64_t p) noexcept nogil:
    return <int32_t><uint32_t>_u32(a, p)


cdef inline int64_t _i64(const uint8_t *a, int64_t p) noexcept nogil:
    return <int64_t>((<uint64_t>_u32(a, p) << 32) | <uint64_t>_u32(a, p + 4))  # wraps like Java's long


cdef inline int64_t _i16(const uint8_t *a, int64_t p) noexcept nogil:
    return <int16_t>((a[p] << 8) | a[p + 1])


cdef struct _Layout:
    # offsets and widths (`fastscan.LAYOUT_NAMES`)
    int64_t o_total, o_magic, o_crc, o_qid, o_flag, o_qoff, o_phys, o_sysflag, o_born_ts, head
    int64_t addr_v4, addr_v6, port, store_ts_size, o_reconsume, o_prepared, o_body_len, tail
    int64_t topic_v1, topic_v2, props_width, fixed
    # magic codes and sysflag bits
    int64_t v1, v2, blank, born_v6, store_v6
    # stop codes
    int64_t more, end_of_file, blank_stop, zero_tail, bad_header, bad_magic, bad_body_neg, bad_body_past
    int64_t bad_topic_len_past, bad_topic_neg, bad_topic_past, bad_props_len_past, bad_props_neg
    int64_t bad_props_past, bad_size
    # column numbers (`fastscan.COLUMNS`)
    int64_t c_pos, c_total, c_magic, c_body_crc, c_queue_id, c_flag, c_queue_offset, c_phys_field
    int64_t c_sys_flag, c_born_ts, c_born_host, c_born_port, c_store_ts, c_store_host, c_store_port
    int64_t c_reconsume, c_prepared, c_body_pos, c_body_len, c_topic_pos, c_topic_len, c_props_pos
    int64_t c_props_len, c_crc


cdef struct _Sized:
    int64_t stop, value


cdef inline _Sized _sized(const uint8_t *a, int64_t p, int64_t size, int64_t width, int64_t more,
                          int64_t bad_width, int64_t bad_neg, int64_t bad_past) noexcept nogil:
    """`walk._sized`: a length of `width` bytes at `p` (1: a signed byte, 2: a short) and its bytes."""
    cdef _Sized r
    cdef int64_t n
    r.stop = more
    r.value = 0
    if p + width > size:
        r.stop = bad_width
        return r
    n = <int8_t>a[p] if width == 1 else _i16(a, p)
    if n < 0:
        r.stop = bad_neg
        r.value = n
        return r
    if p + width + n > size:
        r.stop = bad_past
        return r
    r.value = n
    return r


cdef struct _Stop:
    int64_t n, pos, stop, detail


# How far (bytes) the walk prefetches every cache line ahead of the record it is at. Alone, the walk hops from
# header to header (~1.3 KB apart on a typical log), each a cache and TLB miss the CPU's prefetchers do not
# foresee; touching every line this far ahead turns the hops into one sequential stream, which also feeds the
# body CRC: on the 1 GiB bench log the walk took 0.17 s of CPU without, 0.10 s with it (walk + CRC 0.26 s, 0.17 s;
# 2-16 KiB measure alike, 8 KiB best). A hint only: prefetching never faults, and no check depends on it.
cdef enum:
    _STREAM_AHEAD = 8192
    _STREAM_MAX_RECORD = 1 << 26  # 64 MiB: past the broker's largest message (maxMessageSize, 4 MiB by default)


cdef inline int64_t _stream(const uint8_t *a, int64_t size, int64_t done, int64_t upto) noexcept nogil:
    """Prefetch the lines of [done, min(upto, size)) (64-byte steps); returns the new `done`."""
    if upto > size:
        upto = size
    while done < upto:
        mq_prefetch(a + done)
        done += 64
    return done


cdef struct _Topics:
    # open addressing: slots[h & (cap - 1)] is a topic's number + 1 (0: free); a topic's bytes are
    # buf[offs[i] : offs[i] + lens[i]]
    int64_t *slots
    uint64_t *hashes
    int64_t *offs
    int64_t *lens
    uint8_t *buf
    int64_t cap, n, ncap, used, bufcap


cdef inline uint64_t _topic_hash(const uint8_t *p, int64_t n) noexcept nogil:
    cdef uint64_t h = 0xCBF29CE484222325ULL ^ <uint64_t>n  # FNV-1a
    cdef int64_t i
    for i in range(n):
        h = (h ^ p[i]) * 0x100000001B3ULL
    return h


cdef bint _topics_grow(_Topics *t) noexcept nogil:
    """Double the slots (rehashing) and the per-topic arrays; False when out of memory."""
    cdef int64_t cap = t.cap * 2 if t.cap else 64, i, j
    cdef int64_t *slots = <int64_t *>malloc(cap * sizeof(int64_t))
    cdef void *p
    if slots == NULL:
        return False
    for i in range(cap):
        slots[i] = 0
    for i in range(t.n):
        j = <int64_t>(t.hashes[i] & <uint64_t>(cap - 1))
        while slots[j]:
            j = (j + 1) & (cap - 1)
        slots[j] = i + 1
    free(t.slots)
    t.slots = slots
    t.cap = cap
    t.ncap = cap // 2
    p = realloc(t.hashes, t.ncap * sizeof(uint64_t))
    if p == NULL:
        return False
    t.hashes = <uint64_t *>p
    p = realloc(t.offs, t.ncap * sizeof(int64_t))
    if p == NULL:
        return False
    t.offs = <int64_t *>p
    p = realloc(t.lens, t.ncap * sizeof(int64_t))
    if p == NULL:
        return False
    t.lens = <int64_t *>p
    return True


cdef int64_t _topic_id(_Topics *t, const uint8_t *p, int64_t n) noexcept nogil:
    """`walk.TopicTable.id` on bytes: the topic's number, a new one when not seen before; -1: out of memory."""
    cdef uint64_t h = _topic_hash(p, n)
    cdef int64_t j, i, bufcap
    cdef void *q
    if t.cap:
        j = <int64_t>(h & <uint64_t>(t.cap - 1))
        while t.slots[j]:
            i = t.slots[j] - 1
            if t.hashes[i] == h and t.lens[i] == n and memcmp(t.buf + t.offs[i], p, n) == 0:
                return i
            j = (j + 1) & (t.cap - 1)
    if t.n >= t.ncap:
        if not _topics_grow(t):
            return -1
    if t.used + n > t.bufcap:
        bufcap = max(2 * t.bufcap, t.used + n, 4096)
        q = realloc(t.buf, bufcap)
        if q == NULL:
            return -1
        t.buf = <uint8_t *>q
        t.bufcap = bufcap
    i = t.n
    memcpy(t.buf + t.used, p, n)
    t.offs[i] = t.used
    t.lens[i] = n
    t.hashes[i] = h
    t.used += n
    t.n += 1
    j = <int64_t>(h & <uint64_t>(t.cap - 1))
    while t.slots[j]:
        j = (j + 1) & (t.cap - 1)
    t.slots[j] = i + 1
    return i


cdef class TopicTable:
    """`walk.TopicTable` in C: each distinct topic numbered in order of first appearance, `names[i]` its
    bytes. The walk numbers the topic of every record it accepts without the GIL; `names` grows when the
    walk returns (with the GIL). One walk at a time may use a table."""

    cdef _Topics t
    cdef readonly list names

    def __cinit__(self):
        self.names = []

    def __dealloc__(self):
        free(self.t.slots)
        free(self.t.hashes)
        free(self.t.offs)
        free(self.t.lens)
        free(self.t.buf)

    cdef _publish(self):
        cdef int64_t i
        for i in range(len(self.names), self.t.n):
            self.names.append(PyBytes_FromStringAndSize(<char *>self.t.buf + self.t.offs[i], self.t.lens[i]))

    def id(self, const uint8_t[::1] raw):
        """The number of a topic, a new one for a topic not seen before."""
        cdef int64_t i = _topic_id(&self.t, &raw[0] if raw.shape[0] else <const uint8_t *>"", raw.shape[0])
        if i < 0:
            raise MemoryError("topic table")
        self._publish()
        return i


cdef _Stop _walk(const _Layout *L, const uint8_t *a, int64_t size, int64_t pos, bint verify_crc,
                 int64_t *out, int64_t cap, _Topics *topics, int64_t *ids) noexcept nogil:
    """`walk._commitlog_kernel`, check by check in the same order (see there)."""
    cdef _Stop r
    cdef int64_t n = 0, total, magic, sys_flag, born_addr, store_addr, p, born_host, born_port, store_ts
    cdef int64_t store_host, store_port, reconsume, prepared, body_len, body_pos, topic_width, topic_pos
    cdef int64_t computed, crc
    cdef int64_t streamed = pos + _STREAM_AHEAD - (pos & 63)  # lines before this one were prefetched
    cdef _Sized s, t
    r.detail = 0
    while True:
        r.n = n
        r.pos = pos
        if n == cap:
            r.stop = L.more
            return r
        if pos + L.o_magic + 4 > size:
            r.stop = L.end_of_file
            return r
        total = _i32(a, pos + L.o_total)
        if total > 128 and pos + total + 128 <= size:
            # hints only (no check depends on them): the next record's header and this record's tail (topic,
            # properties) are fetched while this header is decoded; the walk is bound by memory latency
            mq_prefetch(a + pos + total)
            mq_prefetch(a + pos + total + 64)
            mq_prefetch(a + pos + total - 64)
            # (a TOTALSIZE is not checked yet: a damaged one larger than any record streams no further than this)
            streamed = _stream(a, size, streamed, pos + min(total, _STREAM_MAX_RECORD) + _STREAM_AHEAD)
        magic = _i32(a, pos + L.o_magic)
        if magic == L.blank:
            r.stop = L.blank_stop
            r.detail = total
            return r
        if total == 0 and magic == 0:
            r.stop = L.zero_tail
            return r
        if pos + L.head > size:
            r.stop = L.bad_header
            return r
        if magic != L.v1 and magic != L.v2:
            r.stop = L.bad_magic
            r.detail = magic
            return r
        sys_flag = _i32(a, pos + L.o_sysflag)
        born_addr = L.addr_v6 if (sys_flag & L.born_v6) != 0 else L.addr_v4
        store_addr = L.addr_v6 if (sys_flag & L.store_v6) != 0 else L.addr_v4
        p = pos + L.head
        if p + born_addr + L.port + L.store_ts_size + store_addr + L.port > size:
            r.stop = L.bad_header
            return r
        born_host = p
        born_port = _i32(a, p + born_addr)
        p += born_addr + L.port
        store_ts = _i64(a, p)
        p += L.store_ts_size
        store_host = p
        store_port = _i32(a, p + store_addr)
        p += store_addr + L.port
        if p + L.tail > size:
            r.stop = L.bad_header
            return r
        reconsume = _i32(a, p + L.o_reconsume)
        prepared = _i64(a, p + L.o_prepared)
        body_len = _i32(a, p + L.o_body_len)
        p += L.tail
        if body_len < 0:
            r.stop = L.bad_body_neg
            r.detail = body_len
            return r
        if p + body_len > size:
            r.stop = L.bad_body_past
            return r
        body_pos = p
        p += body_len
        topic_width = L.topic_v2 if magic == L.v2 else L.topic_v1
        s = _sized(a, p, size, topic_width, L.more, L.bad_topic_len_past, L.bad_topic_neg, L.bad_topic_past)
        if s.stop != L.more:
            r.stop = s.stop
            r.detail = s.value
            return r
        topic_pos = p + topic_width
        p = topic_pos + s.value
        t = _sized(a, p, size, L.props_width, L.more, L.bad_props_len_past, L.bad_props_neg, L.bad_props_past)
        if t.stop != L.more:
            r.stop = t.stop
            r.detail = t.value
            return r
        p += L.props_width
        computed = (L.fixed + born_addr + L.port + store_addr + L.port + body_len + topic_width + s.value
                    + t.value)
        if total != computed or total <= 0:
            r.stop = L.bad_size
            r.detail = computed
            return r
        crc = -1
        if verify_crc and body_len > 0:
            crc = mq_crc32(0, a + body_pos, body_len) & 0x7FFFFFFF
        out[L.c_pos * cap + n] = pos
        out[L.c_total * cap + n] = total
        out[L.c_magic * cap + n] = magic
        out[L.c_body_crc * cap + n] = _i32(a, pos + L.o_crc)
        out[L.c_queue_id * cap + n] = _i32(a, pos + L.o_qid)
        out[L.c_flag * cap + n] = _i32(a, pos + L.o_flag)
        out[L.c_queue_offset * cap + n] = _i64(a, pos + L.o_qoff)
        out[L.c_phys_field * cap + n] = _i64(a, pos + L.o_phys)
        out[L.c_sys_flag * cap + n] = sys_flag
        out[L.c_born_ts * cap + n] = _i64(a, pos + L.o_born_ts)
        out[L.c_born_host * cap + n] = born_host
        out[L.c_born_port * cap + n] = born_port
        out[L.c_store_ts * cap + n] = store_ts
        out[L.c_store_host * cap + n] = store_host
        out[L.c_store_port * cap + n] = store_port
        out[L.c_reconsume * cap + n] = reconsume
        out[L.c_prepared * cap + n] = prepared
        out[L.c_body_pos * cap + n] = body_pos
        out[L.c_body_len * cap + n] = body_len
        out[L.c_topic_pos * cap + n] = topic_pos
        out[L.c_topic_len * cap + n] = s.value
        out[L.c_props_pos * cap + n] = p
        out[L.c_props_len * cap + n] = t.value
        out[L.c_crc * cap + n] = crc
        if topics != NULL:
            ids[n] = _topic_id(topics, a + topic_pos, s.value)
            if ids[n] < 0:  # out of memory: reported by the caller; the record is not counted
                r.stop = -1
                return r
        n += 1
        pos += total


cdef class CommitLogWalk:
    """The CommitLog walk (`walk._commitlog_kernel`) for one layout: `walk(a, pos, verify_crc, out)`
    scans records from `pos` into `out[:, :n]` and returns (n, pos, stop, detail), without the GIL.

    `layout`, `codes`, `stops` and `columns` are name -> number mappings given by `fastscan`
    (`LAYOUT_NAMES`, the magic codes and sysflag bits, the stop codes, `COLUMNS`); a missing name
    raises KeyError here, once, instead of misreading records.
    """

    cdef _Layout L
    cdef readonly int ncol

    def __init__(self, dict layout, dict codes, dict stops, dict columns):
        cdef _Layout *L = &self.L
        (L.o_total, L.o_magic, L.o_crc, L.o_qid, L.o_flag, L.o_qoff, L.o_phys, L.o_sysflag, L.o_born_ts,
         L.head, L.addr_v4, L.addr_v6, L.port, L.store_ts_size, L.o_reconsume, L.o_prepared, L.o_body_len,
         L.tail, L.topic_v1, L.topic_v2, L.props_width, L.fixed) = [layout[k] for k in (
            "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
            "sys_flag", "born_timestamp", "header_size", "address_v4", "address_v6", "port_size",
            "store_timestamp_size", "reconsume_times", "prepared_transaction_offset", "body_length", "tail_size",
            "topic_length_v1", "topic_length_v2", "properties_length", "fixed_size")]
        L.v1, L.v2, L.blank, L.born_v6, L.store_v6 = [codes[k] for k in (
            "message_v1", "message_v2", "blank", "born_host_v6", "store_host_v6")]
        (L.more, L.end_of_file, L.blank_stop, L.zero_tail, L.bad_header, L.bad_magic, L.bad_body_neg,
         L.bad_body_past, L.bad_topic_len_past, L.bad_topic_neg, L.bad_topic_past, L.bad_props_len_past,
         L.bad_props_neg, L.bad_props_past, L.bad_size) = [stops[k] for k in (
            "STOP_MORE", "STOP_END_OF_FILE", "STOP_BLANK", "STOP_ZERO_TAIL", "BAD_HEADER", "BAD_MAGIC",
            "BAD_BODY_NEG", "BAD_BODY_PAST", "BAD_TOPIC_LEN_PAST", "BAD_TOPIC_NEG", "BAD_TOPIC_PAST",
            "BAD_PROPS_LEN_PAST", "BAD_PROPS_NEG", "BAD_PROPS_PAST", "BAD_SIZE")]
        (L.c_pos, L.c_total, L.c_magic, L.c_body_crc, L.c_queue_id, L.c_flag, L.c_queue_offset, L.c_phys_field,
         L.c_sys_flag, L.c_born_ts, L.c_born_host, L.c_born_port, L.c_store_ts, L.c_store_host, L.c_store_port,
         L.c_reconsume, L.c_prepared, L.c_body_pos, L.c_body_len, L.c_topic_pos, L.c_topic_len, L.c_props_pos,
         L.c_props_len, L.c_crc) = [columns[k] for k in (
            "pos", "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
            "physical_offset_field", "sys_flag", "born_timestamp", "born_host_pos", "born_port",
            "store_timestamp", "store_host_pos", "store_port", "reconsume_times", "prepared_transaction_offset",
            "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len", "computed_crc")]
        self.ncol = len(columns)

    def __call__(self, const uint8_t[::1] a, int64_t pos, bint verify_crc, int64_t[:, ::1] out,
                 TopicTable topics=None, int64_t[::1] ids=None):
        """With `topics`, `ids[n]` is the topic number of record n (`walk.commitlog_kernel`)."""
        cdef _Stop r
        cdef int64_t cap = out.shape[1]
        cdef const uint8_t *data = &a[0] if a.shape[0] else NULL
        cdef int64_t *cols = &out[0, 0] if cap else NULL
        cdef _Topics *t = NULL
        cdef int64_t *tid = NULL
        if out.shape[0] != self.ncol:
            raise ValueError(f"out has {out.shape[0]} rows, the walk writes {self.ncol}")
        if pos < 0:
            raise ValueError(f"negative position {pos}")
        if topics is not None:
            if ids is None or ids.shape[0] < cap:
                raise ValueError("ids must hold a topic number for each column of out")
            t = &topics.t
            tid = &ids[0] if cap else NULL
        with nogil:
            r = _walk(&self.L, data, a.shape[0], pos, verify_crc, cols, cap, t, tid)
        if topics is not None:
            topics._publish()
        if r.stop < 0:
            raise MemoryError("topic table")
        return r.n, r.pos, r.stop, r.detail


def gather(const uint8_t[::1] a, const int64_t[:] starts, const int64_t[:] lens, const int32_t[:] offsets,
           uint8_t[::1] out):
    """Copy a[starts[i]:starts[i]+lens[i]] to out[offsets[i]:...] (Arrow binary/string data)."""
    cdef Py_ssize_t i
    with nogil:
        for i in range(starts.shape[0]):
            if lens[i] > 0:
                memcpy(&out[offsets[i]], &a[starts[i]], lens[i])


cdef int64_t _property_pairs(const uint8_t *b, const int64_t[:] starts, const int64_t[:] lens,
                             int32_t[:] rec_offsets, int64_t[:] kpos, int64_t[:] klen, int64_t[:] vpos,
                             int64_t[:] vlen) noexcept nogil:
    cdef Py_ssize_t r, q, t, nrec = starts.shape[0], cap = kpos.shape[0]
    cdef int64_t m = 0, first, i, j, k, end, dup
    cdef bint same
    for r in range(nrec):
        rec_offsets[r] = <int32_t>m
        first = m
        i = starts[r]
        end = i + lens[r]
        while i < end:
            j = i
            k = -1
            while j < end and b[j] != 2:
                if k < 0 and b[j] == 1:
                    k = j
                j += 1
            if k > i and k < j - 1:  # a name and a value
                dup = -1
                for q in range(first, m):
                    if klen[q] == k - i:
                        same = True
                        for t in range(k - i):
                            if b[kpos[q] + t] != b[i + t]:
                                same = False
                                break
                        if same:
                            dup = q
                            break
                if dup >= 0:
                    vpos[dup] = k + 1
                    vlen[dup] = j - k - 1
                else:
                    if m == cap:
                        return -1
                    kpos[m] = i
                    klen[m] = k - i
                    vpos[m] = k + 1
                    vlen[m] = j - k - 1
                    m += 1
            i = j + 1
    rec_offsets[nrec] = <int32_t>m
    return m


def property_pairs(const uint8_t[::1] a, const int64_t[:] starts, const int64_t[:] lens, int32_t[:] rec_offsets,
                   int64_t[:] kpos, int64_t[:] klen, int64_t[:] vpos, int64_t[:] vlen):
    """`kernels.property_pairs` (`string2messageProperties` on bytes): the number of pairs, or -1 when
    the pair arrays are too small."""
    cdef int64_t m
    cdef const uint8_t *b = &a[0] if a.shape[0] else NULL
    with nogil:
        m = _property_pairs(b, starts, lens, rec_offsets, kpos, klen, vpos, vlen)
    return m


def host_keys(const uint8_t[::1] a, const int64_t[:] pos, int64_t[:] out):
    """IPv4 address and port of each host as one int64 (only meaningful for IPv4 hosts)."""
    cdef Py_ssize_t i
    cdef const uint8_t *b = &a[0] if a.shape[0] else NULL
    with nogil:
        for i in range(pos.shape[0]):
            out[i] = <int64_t>((<uint64_t>_u32(b, pos[i]) << 32) | <uint64_t>_u32(b, pos[i] + 4))

