# The simulator's property reader (`mqtool/store/propscan.py`): header checks, template match, values.
# The record's layout comes in `geo` (built from `mqtool.formats.commitlog` by `propscan.GEOMETRY`);
# `propscan.scan_py` is the reference this kernel equals, row for row.
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


cdef enum:
    G_TOTAL_AT, G_TOTAL_W, G_MAGIC_AT, G_MAGIC_W, G_QID_AT, G_QID_W, G_SYSFLAG_AT, G_SYSFLAG_W, G_HEAD,
    G_NO_HOSTS, G_BL, G_V4, G_V6, G_BORN_V6, G_STORE_V6, G_M1, G_M2, G_TL1, G_TL2, G_PL, G_SEP, G_NV,
    G_MAX_TOTAL, G_FIXED, G_STRIDE, G_COUNT


cdef inline int64_t _be(const unsigned char *a, int64_t at, int64_t w) noexcept nogil:
    """The signed big-endian `w`-byte integer at `a[at:at + w]`."""
    cdef int64_t v = 0, i
    for i in range(w):
        v = (v << 8) | a[at + i]
    if v >= (<int64_t>1 << (8 * w - 1)):
        v -= <int64_t>1 << (8 * w)
    return v


cdef int64_t _match(const unsigned char *a, int64_t b, int64_t e, const unsigned char *keys, const int64_t *key_at,
                    int64_t j0, int64_t j1, int64_t trail, int64_t sep, int64_t nv, int64_t *vs,
                    int64_t *ve) noexcept nogil:
    """1 when a[b:e] holds exactly the keys `key_at[j0:j1]` in order, each followed by NV and a non-empty
    value without SEP, SEP between them (and at the end when `trail`); the values' places in `vs`, `ve`."""
    cdef int64_t p = b, j, i, ks, kl, s
    for j in range(j0, j1):
        if j > j0:
            if p >= e or a[p] != sep:
                return 0
            p += 1
        ks = key_at[j]
        kl = key_at[j + 1] - ks
        if p + kl + 1 > e:
            return 0
        for i in range(kl):
            if a[p + i] != keys[ks + i]:
                return 0
        p += kl
        if a[p] != nv:
            return 0
        p += 1
        s = p
        while p < e and a[p] != sep:
            p += 1
        if p == s:
            return 0
        vs[j - j0] = s
        ve[j - j0] = p
    if trail:
        return p + 1 == e and a[p] == sep
    return p == e


cdef void _row(const unsigned char *a, int64_t size, int64_t rel, int64_t delta, int64_t n, int64_t flen,
               const int64_t *g, const unsigned char *keys, const int64_t *key_at, const int64_t *first,
               const int64_t *trail, const int64_t *groups, int64_t nt, int64_t nw, int64_t *vs, int64_t *ve,
               int64_t *row) noexcept nogil:
    """One record's row (see `propscan`): -1 everywhere but what the checks let it fill."""
    cdef int64_t r, total, magic, sysflag, after_tail, body_len, after_body, tw, topic_len, props_at
    cdef int64_t props_len, b, e, t, w, gi, c, i, num
    if rel >= flen or rel + g[G_HEAD] > n:
        return
    r = rel + delta
    total = _be(a, r + g[G_TOTAL_AT], g[G_TOTAL_W])
    magic = _be(a, r + g[G_MAGIC_AT], g[G_MAGIC_W])
    sysflag = _be(a, r + g[G_SYSFLAG_AT], g[G_SYSFLAG_W])
    if (magic != g[G_M1] and magic != g[G_M2]) or total <= g[G_HEAD] or total > g[G_MAX_TOTAL] or rel + total > n:
        return
    after_tail = g[G_NO_HOSTS] + (g[G_V6] if sysflag & g[G_BORN_V6] else g[G_V4]) + \
        (g[G_V6] if sysflag & g[G_STORE_V6] else g[G_V4])
    if after_tail > total:
        return
    body_len = _be(a, r + after_tail - g[G_BL], g[G_BL])
    after_body = after_tail + body_len
    if body_len < 0 or after_body > total:
        return
    tw = g[G_TL2] if magic == g[G_M2] else g[G_TL1]
    if r + after_body + tw > size:
        return
    topic_len = _be(a, r + after_body, tw)
    if topic_len < 0:
        return
    props_at = after_body + tw + topic_len
    if r + props_at + g[G_PL] > size:
        return
    props_len = _be(a, r + props_at, g[G_PL])
    if props_len < 0 or props_at + g[G_PL] + props_len > total:
        return
    b = r + props_at + g[G_PL]
    e = b + props_len
    row[0] = 0
    row[1] = props_len + body_len + after_tail - g[G_NO_HOSTS]
    row[2] = body_len
    row[3] = sysflag
    row[4] = b
    row[5] = e
    row[8] = _be(a, r + g[G_QID_AT], g[G_QID_W])
    row[9] = r + after_body + tw
    row[10] = r + props_at
    for t in range(nt):
        if not _match(a, b, e, keys, key_at, first[t], first[t + 1], trail[t], g[G_SEP], g[G_NV], vs, ve):
            continue
        row[0] = 1
        if not trail[t]:
            row[1] += 1  # the separator a re-put's string ends with
        row[6] = t
        for w in range(nw):
            gi = groups[t * nw + w]
            c = g[G_FIXED] + g[G_STRIDE] * w
            if gi >= 0:
                row[c] = vs[gi]
                row[c + 1] = ve[gi]
        c = g[G_FIXED]
        if nw > 0 and row[c] >= 0 and 0 < row[c + 1] - row[c] <= 18:  # the first value as a number
            num = 0
            for i in range(row[c], row[c + 1]):
                if a[i] < 48 or a[i] > 57:
                    num = -1
                    break
                num = num * 10 + (a[i] - 48)
            row[7] = num
        return


def props_scan(const unsigned char[::1] buf, const int64_t[::1] rels, int64_t delta, int64_t n, int64_t flen,
               const int64_t[::1] geo, const unsigned char[::1] keys, const int64_t[::1] key_at,
               const int64_t[::1] first, const int64_t[::1] trail, const int64_t[:, ::1] groups, int64_t[:, ::1] out):
    """`propscan.scan_py` in C, the GIL released: `out`'s row of each record at `rels[k]`; returns (the first
    record no template matches, or `len(rels)`; the template of the last one matched, or -1)."""
    cdef int64_t nr = rels.shape[0], width = out.shape[1], nt = first.shape[0] - 1, nw = groups.shape[1]
    cdef int64_t size = buf.shape[0], k, j, longest = 1, unmatched = nr, last = -1
    cdef const unsigned char *a = &buf[0] if size else NULL
    cdef const unsigned char *kp = &keys[0]
    cdef int64_t *vs
    cdef int64_t g[G_COUNT]
    if geo.shape[0] != G_COUNT or width != geo[G_FIXED] + geo[G_STRIDE] * nw or out.shape[0] != nr:
        raise ValueError("props_scan: arrays of the wrong shape")
    if delta < 0 or n < 0 or delta + n > size:
        raise ValueError("props_scan: the span lies outside the bytes")  # every read below stays inside them
    if groups.shape[0] < max(nt, 1):
        raise ValueError("props_scan: a template without its groups")
    for j in range(G_COUNT):
        g[j] = geo[j]
    for j in range(nt):
        longest = max(longest, first[j + 1] - first[j])
    vs = <int64_t *>malloc(sizeof(int64_t) * (2 * longest + 1))
    if vs == NULL:
        raise MemoryError()
    with nogil:
        for k in range(nr):
            for j in range(width):
                out[k, j] = -1
            _row(a, size, rels[k], delta, n, flen, g, kp, &key_at[0], &first[0], &trail[0], &groups[0, 0], nt, nw,
                 vs, vs + longest, &out[k, 0])
            if out[k, 0] == 0 and unmatched == nr:
                unmatched = k
            elif out[k, 0] == 1:
                last = out[k, 6]
    free(vs)
    return unmatched, last


def props_row(const unsigned char[::1] buf, int64_t rel, int64_t delta, int64_t n, int64_t flen,
              const int64_t[::1] geo):
    """`props_scan`'s row of one record against no template (its first `FIXED` columns), as a tuple: the
    per-record read (`MappedBase._read`) without the set-up of a batch."""
    cdef int64_t row[32]
    cdef int64_t g[G_COUNT]
    cdef int64_t j, size = buf.shape[0]
    cdef unsigned char nokey = 0
    cdef int64_t zero = 0
    if geo.shape[0] != G_COUNT or geo[G_FIXED] > 32:
        raise ValueError("props_row: arrays of the wrong shape")
    if delta < 0 or n < 0 or delta + n > size:
        raise ValueError("props_row: the span lies outside the bytes")
    for j in range(G_COUNT):
        g[j] = geo[j]
    for j in range(g[G_FIXED]):
        row[j] = -1
    with nogil:
        _row(&buf[0] if size else NULL, size, rel, delta, n, flen, g, &nokey, &zero, &zero, &zero, &zero, 0, 0,
             NULL, NULL, row)
    return tuple([row[j] for j in range(g[G_FIXED])])
