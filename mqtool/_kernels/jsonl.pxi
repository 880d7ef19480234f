# The line writer of `messages --json` (`inspect/jsonlines.py`): one JSON line per CommitLog row,
# byte for byte what the record path (`record_dict` -> `output.write_jsonl`) prints; that path is its
# reference and what runs without this module. Texts between values come from the caller (`lits`),
# numbers, hosts, hex and strings are written here; a row it cannot write (bytes that are not UTF-8, a
# repeated property name) is left to the record path and marked in `ends`.
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memmove


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_clzll(unsigned long long) nogil


JSONL_TEXTS = ("OPEN", "POSITION", "TOTAL_SIZE", "MAGIC_V2", "MAGIC_V1", "CRC_TRUE", "CRC_FALSE", "FLAG",
               "QUEUE_OFFSET", "SYS_FLAG", "BORN_HOST", "STORE_TIMESTAMP", "STORE_HOST", "RECONSUME_TIMES",
               "PREPARED", "TOPIC", "PROPERTIES", "SEP", "COLON", "UNIQ_FIELD", "MSG_ID", "NULL_MSG_ID",
               "BODY_LENGTH", "BODY", "BODY_NULL_END", "BODY_NULL_DLEDGER", "DLEDGER", "TERM", "POS",
               "DLEDGER_END", "END")
"""The constant texts of a line, in the order `json_lines` takes them (`lits`/`lit_at`)."""

cdef enum:
    L_OPEN, L_POSITION, L_TOTAL_SIZE, L_MAGIC_V2, L_MAGIC_V1, L_CRC_TRUE, L_CRC_FALSE, L_FLAG
    L_QUEUE_OFFSET, L_SYS_FLAG, L_BORN_HOST, L_STORE_TIMESTAMP, L_STORE_HOST, L_RECONSUME_TIMES
    L_PREPARED, L_TOPIC, L_PROPERTIES, L_SEP, L_COLON, L_UNIQ_FIELD, L_MSG_ID, L_NULL_MSG_ID
    L_BODY_LENGTH, L_BODY, L_BODY_NULL_END, L_BODY_NULL_DLEDGER, L_DLEDGER, L_TERM, L_POS
    L_DLEDGER_END, L_END, L_COUNT

JSONL_LAYOUT = ("pos", "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "sys_flag",
                "born_timestamp", "born_host_pos", "born_port", "store_timestamp", "store_host_pos", "store_port",
                "reconsume_times", "prepared_transaction_offset", "topic_pos", "topic_len", "props_pos",
                "props_len", "physical_offset_field", "body_pos", "body_len", "COMPRESSED", "STOREHOST_V6",
                "MAGIC_V2", "HOST_V4", "HOST_V6", "UNIQ_LEN", "UNIQ8")
"""The scan's columns (by their `fastscan.COLUMNS` names) and the constants `json_lines` takes in `lay`
(their indices and values), in this order; the caller takes them from `store/fastscan.py` and
`formats/`: nothing of the layout is spelled here."""

cdef enum:
    K_POS, K_TOTAL, K_MAGIC, K_BODY_CRC, K_QUEUE_ID, K_FLAG, K_QUEUE_OFFSET, K_SYS_FLAG, K_BORN_TS
    K_BORN_HOST, K_BORN_PORT, K_STORE_TS, K_STORE_HOST, K_STORE_PORT, K_RECONSUME, K_PREPARED
    K_TOPIC_POS, K_TOPIC_LEN, K_PROPS_POS, K_PROPS_LEN, K_PHYS_FIELD, K_BODY_POS, K_BODY_LEN
    K_COMPRESSED, K_STOREHOST_V6, K_MAGIC_V2, K_HOST_V4, K_HOST_V6, K_UNIQ_LEN, K_UNIQ8, K_COUNT

assert len(JSONL_TEXTS) == L_COUNT and len(JSONL_LAYOUT) == K_COUNT

cdef unsigned char jl_digits[200]  # "00" .. "99"
cdef uint64_t jl_pow10[20]
cdef unsigned char jl_hex_upper[512]  # "00" .. "FF"
cdef unsigned char jl_hex_lower[512]
cdef unsigned char jl_class[256]  # how `jl_str` writes a byte: 0 itself, 1 a two-character escape, 2 \u00XX, 3 UTF-8
cdef unsigned char jl_escape[128]  # the letter after '\\' where json.dumps writes a two-character escape
cdef uint64_t JL_ONES = 0x0101010101010101ULL
cdef uint64_t JL_HIGHS = 0x8080808080808080ULL


cdef void jl_init() noexcept:
    cdef int i
    cdef const char *hexu = b"0123456789ABCDEF"
    cdef const char *hexl = b"0123456789abcdef"
    for i in range(100):
        jl_digits[2 * i] = 48 + i // 10
        jl_digits[2 * i + 1] = 48 + i % 10
    jl_pow10[0] = 1
    for i in range(1, 20):
        jl_pow10[i] = jl_pow10[i - 1] * 10
    for i in range(256):
        jl_hex_upper[2 * i] = hexu[i >> 4]
        jl_hex_upper[2 * i + 1] = hexu[i & 15]
        jl_hex_lower[2 * i] = hexl[i >> 4]
        jl_hex_lower[2 * i + 1] = hexl[i & 15]
        jl_class[i] = 2 if i < 0x20 else 3 if i >= 0x80 else 0
    for i in range(128):
        jl_escape[i] = 0
    for i, e in ((34, 34), (92, 92), (8, 98), (12, 102), (10, 110), (13, 114), (9, 116)):  # " \ b f n r t
        jl_class[i] = 1
        jl_escape[i] = e


jl_init()


cdef struct JlCtx:
    const unsigned char *a  # the mapped CommitLog file
    Py_ssize_t alen
    unsigned char *out  # the lines
    Py_ssize_t olen
    const unsigned char *lits  # the constant texts (`JSONL_TEXTS`)
    Py_ssize_t lits_len
    const int64_t *lit_at
    int64_t *keys  # scratch (3, kcols): each property name's start, length and first 8 bytes
    Py_ssize_t kcols
    int64_t uniq_len
    uint64_t uniq8


cdef inline uint64_t jl_load8(const unsigned char *p) noexcept nogil:
    """8 bytes as one unaligned little-endian load."""
    cdef uint64_t x
    memcpy(&x, p, 8)
    return x


cdef inline Py_ssize_t jl_put(JlCtx *x, Py_ssize_t o, const unsigned char *src, Py_ssize_t slen, Py_ssize_t s,
                              Py_ssize_t n) noexcept nogil:
    """Bytes src[s:s + n] to out[o:]. Up to 64 bytes (every text of a line) as a copy of a constant size
    (a few moves, no call) when both reach that far: the bytes past n are written again by what follows."""
    if n <= 16 and s + 16 <= slen and o + 16 <= x.olen:
        memcpy(x.out + o, src + s, 16)
    elif n <= 32 and s + 32 <= slen and o + 32 <= x.olen:
        memcpy(x.out + o, src + s, 32)
    elif n <= 64 and s + 64 <= slen and o + 64 <= x.olen:
        memcpy(x.out + o, src + s, 64)
    else:
        memcpy(x.out + o, src + s, n)
    return o + n


cdef inline Py_ssize_t jl_lit(JlCtx *x, Py_ssize_t o, int k) noexcept nogil:
    """Constant text k."""
    return jl_put(x, o, x.lits, x.lits_len, x.lit_at[k], x.lit_at[k + 1] - x.lit_at[k])


cdef inline Py_ssize_t jl_int(JlCtx *x, Py_ssize_t o, int64_t v) noexcept nogil:
    """Decimal digits of an int64 (as `str(int)`): two digits a step; their count from the bit length
    (floor(log10(2) * bits) = bits * 1233 >> 12, one more when `jl_pow10` says so)."""
    cdef uint64_t u, u1, q, r, t
    cdef Py_ssize_t digits, p
    cdef unsigned char *out = x.out
    if v < 0:
        out[o] = 45
        o += 1
        u = <uint64_t>(-(v + 1)) + 1
    else:
        u = <uint64_t>v
    u1 = u | 1
    t = ((64 - <uint64_t>__builtin_clzll(u1)) * 1233) >> 12
    digits = <Py_ssize_t>t + (1 if u1 >= jl_pow10[t] else 0)
    p = o + digits
    while u >= 100:
        q = u // 100
        r = (u - q * 100) * 2
        p -= 2
        out[p] = jl_digits[r]
        out[p + 1] = jl_digits[r + 1]
        u = q
    if u >= 10:
        r = u * 2
        out[p - 2] = jl_digits[r]
        out[p - 1] = jl_digits[r + 1]
    else:
        out[p - 1] = <unsigned char>(48 + u)
    return o + digits


cdef inline Py_ssize_t jl_lit_int(JlCtx *x, Py_ssize_t o, int k, int64_t v) noexcept nogil:
    """Constant text k and the digits of v: a key and its number."""
    return jl_int(x, jl_lit(x, o, k), v)


cdef inline Py_ssize_t jl_host4(JlCtx *x, Py_ssize_t o, Py_ssize_t pos, int64_t port) noexcept nogil:
    """An IPv4 host as `fastscan.host_text` writes it, in JSON quotes: `"a.b.c.d:port"`."""
    cdef int t
    x.out[o] = 34
    o += 1
    for t in range(4):
        o = jl_int(x, o, x.a[pos + t])
        x.out[o] = 46 if t < 3 else 58
        o += 1
    o = jl_int(x, o, port)
    x.out[o] = 34
    return o + 1


cdef inline int jl_utf8_len(const unsigned char *a, Py_ssize_t i, Py_ssize_t e) noexcept nogil:
    """Bytes of the well-formed UTF-8 sequence at a[i] (lead byte >= 0x80, what Python's strict decoder
    accepts: no overlongs, surrogates, > U+10FFFF) ending before e; 0 when it is not one."""
    cdef unsigned char b = a[i], b1
    cdef int need, lo, hi, t
    if 0xC2 <= b <= 0xDF:
        need, lo, hi = 1, 0x80, 0xBF
    elif b == 0xE0:
        need, lo, hi = 2, 0xA0, 0xBF
    elif 0xE1 <= b <= 0xEC or 0xEE <= b <= 0xEF:
        need, lo, hi = 2, 0x80, 0xBF
    elif b == 0xED:
        need, lo, hi = 2, 0x80, 0x9F
    elif b == 0xF0:
        need, lo, hi = 3, 0x90, 0xBF
    elif 0xF1 <= b <= 0xF3:
        need, lo, hi = 3, 0x80, 0xBF
    elif b == 0xF4:
        need, lo, hi = 3, 0x80, 0x8F
    else:
        return 0
    if i + need >= e:
        return 0
    b1 = a[i + 1]
    if b1 < lo or b1 > hi:
        return 0
    for t in range(2, need + 1):
        if a[i + t] < 0x80 or a[i + t] > 0xBF:
            return 0
    return need + 1


cdef inline uint64_t jl_special8(uint64_t v) noexcept nogil:
    """The high bit of each of the 8 bytes of v (little-endian) that needs more than itself in a JSON
    string (a byte < 0x20 or >= 0x80, '"' 0x22, '\\' 0x5C), at least of the first such: 0 when none.
    SWAR: a subtraction's borrow starts only at a byte below what is subtracted (v - 0x20 each,
    v ^ '"' - 1, v ^ '\\' - 1) and goes to later bytes only, so the first high bit set is exact (a
    byte >= 0x80 has its own)."""
    cdef uint64_t q = v ^ 0x2222222222222222ULL
    cdef uint64_t s = v ^ 0x5C5C5C5C5C5C5C5CULL
    return ((v - 0x2020202020202020ULL) | (q - JL_ONES) | (s - JL_ONES) | v) & JL_HIGHS


cdef inline Py_ssize_t jl_str(JlCtx *x, Py_ssize_t o, Py_ssize_t i, Py_ssize_t e, int stop1, int stop2,
                              Py_ssize_t *stopped) noexcept nogil:
    """A JSON string of the UTF-8 bytes a[i:] up to e or the first byte `stop1` or `stop2` (0x01/0x02
    of the properties; 256: none), as `json.dumps(ensure_ascii=False)` writes it. Returns its end in
    out (`*stopped`: where it stopped in a), or -1 at bytes that are not well-formed UTF-8. The UTF-8
    check and the copy are one pass: 8 bytes are copied a step up to the first that needs more."""
    cdef const unsigned char *a = x.a
    cdef unsigned char *out = x.out
    cdef uint64_t m
    cdef Py_ssize_t k, t, lo
    cdef unsigned char b, cls
    cdef int n
    out[o] = 34
    o += 1
    while i < e:
        if i + 8 <= x.alen and o + 8 <= x.olen:
            m = jl_special8(jl_load8(a + i))
            memcpy(out + o, a + i, 8)
            k = 8 if m == 0 else (__builtin_ctzll(m) >> 3)
            if k > e - i:
                k = e - i
            o += k
            i += k
            if k == 8 or i == e:
                continue
        b = a[i]
        cls = jl_class[b]
        if cls == 0:
            out[o] = b
            o += 1
            i += 1
        elif cls == 1:
            out[o] = 92
            out[o + 1] = jl_escape[b]
            o += 2
            i += 1
        elif cls == 2:
            if b == stop1 or b == stop2:
                break
            out[o] = 92
            out[o + 1] = 117
            out[o + 2] = 48
            out[o + 3] = 48
            out[o + 4] = 48 + (b >> 4)
            lo = b & 15
            out[o + 5] = (48 + lo) if lo < 10 else (87 + lo)
            o += 6
            i += 1
        else:
            n = jl_utf8_len(a, i, e)
            if n == 0:
                stopped[0] = i
                return -1
            for t in range(n):
                out[o + t] = a[i + t]
            o += n
            i += n
    out[o] = 34
    stopped[0] = i
    return o + 1


cdef inline Py_ssize_t jl_hex(JlCtx *x, Py_ssize_t o, Py_ssize_t s, Py_ssize_t n,
                              const unsigned char *table) noexcept nogil:
    """Two hex digits a byte of a[s:s + n]."""
    cdef Py_ssize_t i
    cdef int r
    for i in range(s, s + n):
        r = 2 * x.a[i]
        x.out[o] = table[r]
        x.out[o + 1] = table[r + 1]
        o += 2
    return o


cdef inline uint64_t jl_key8(JlCtx *x, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """The n <= 8 bytes a[i:i + n] as a little-endian integer (a name compared in one step)."""
    cdef uint64_t v = 0
    cdef Py_ssize_t t
    if i + 8 <= x.alen:
        v = jl_load8(x.a + i)
        if n < 8:
            v &= (<uint64_t>1 << (8 * n)) - 1
        return v
    for t in range(n):
        v |= (<uint64_t>x.a[i + t]) << (8 * t)
    return v


cdef inline Py_ssize_t jl_properties(JlCtx *x, Py_ssize_t o, Py_ssize_t s, Py_ssize_t n, Py_ssize_t *u_at,
                                     Py_ssize_t *u_end) noexcept nogil:
    """The properties' pairs as `"name": "value"` (`string2messageProperties`: pairs end at 0x02, a name
    at its first 0x01; a pair without a name or a value is left out), each byte checked and copied
    once. Returns the end in out (`*u_at`/`*u_end`: where the UNIQ_KEY value's JSON text is in out, or
    -1), or -1 for bytes that are not UTF-8 or a repeated name (the record path's dict keeps the first
    place and the last value): the row is then the record path's."""
    cdef const unsigned char *a = x.a
    cdef int64_t *kpos = x.keys
    cdef int64_t *klen = x.keys + x.kcols
    cdef int64_t *k8s = x.keys + 2 * x.kcols
    cdef Py_ssize_t i = s, e = s + n, m = 0, at, j, k, v_at, kn, q, t
    cdef uint64_t k8
    cdef bint name, same
    u_at[0] = -1
    u_end[0] = -1
    while i < e:
        at = o
        if m > 0:
            o = jl_lit(x, o, L_SEP)
        o = jl_str(x, o, i, e, 1, 2, &j)
        if o < 0:
            return -1
        if j < e and a[j] == 1:
            name = j > i
            o = jl_lit(x, o, L_COLON)
            v_at = o
            o = jl_str(x, o, j + 1, e, 2, 2, &k)  # the rest of the pair: also checked when left out
            if o < 0:
                return -1
            if name and k > j + 1:
                kn = j - i
                k8 = jl_key8(x, i, kn) if kn <= 8 else 0
                for q in range(m):
                    if klen[q] == kn:
                        same = <uint64_t>k8s[q] == k8
                        if kn > 8:
                            for t in range(kn):
                                if a[kpos[q] + t] != a[i + t]:
                                    same = False
                                    break
                        if same:
                            return -1
                kpos[m] = i
                klen[m] = kn
                k8s[m] = <int64_t>k8
                m += 1
                if kn == x.uniq_len and k8 == x.uniq8:
                    u_at[0] = v_at
                    u_end[0] = o
            else:
                o = at
            i = k + 1
        else:  # no 0x01 before the pair's end: no value
            o = at
            i = j + 1
    return o


cdef struct JlHost:  # the last IPv4 host written (its 8 bytes: address and port) and where its text is in out
    uint64_t key
    Py_ssize_t at
    Py_ssize_t end


cdef inline Py_ssize_t jl_host(JlCtx *x, Py_ssize_t o, Py_ssize_t hp, int64_t port, int64_t known,
                               const unsigned char *host_tab, Py_ssize_t host_len, const int64_t *host_at,
                               JlHost *last) noexcept nogil:
    """A born or store host's text: the host table's `known`-th when >= 0, else the IPv4 host and port at
    a[hp], copied from where the row before wrote it when it is the same."""
    cdef uint64_t k
    cdef Py_ssize_t e
    if known >= 0:
        return jl_put(x, o, host_tab, host_len, host_at[known], host_at[known + 1] - host_at[known])
    k = jl_load8(x.a + hp)
    if last.at >= 0 and k == last.key:
        memmove(x.out + o, x.out + last.at, last.end - last.at)
        return o + last.end - last.at
    e = jl_host4(x, o, hp, port)
    last.key = k
    last.at = o
    last.end = e
    return e


cdef inline Py_ssize_t jl_leave(int64_t *ends, Py_ssize_t k, Py_ssize_t start, JlHost *born,
                                JlHost *store) noexcept nogil:
    """Row k (its line began at `start`) left to the record path: its text goes, with the host texts
    written in it (forgotten when there), and `ends[k]` says so; where the next row starts."""
    ends[k] = -start - 1
    if born.at >= start:
        born.at = -1
    if store.at >= start:
        store.at = -1
    return start


def json_lines(const unsigned char[::1] a, const int64_t[:, ::1] c, Py_ssize_t row_lo, Py_ssize_t row_hi,
               int64_t base, const int64_t[::1] lay, const unsigned char[::1] lits, const int64_t[::1] lit_at,
               const unsigned char[::1] flag_tab, const int64_t[::1] flag_at, const int64_t[::1] flag_codes,
               const unsigned char[::1] host_tab, const int64_t[::1] host_at, const int64_t[::1] born,
               const int64_t[::1] store, const int64_t[:, ::1] dl, const unsigned char[::1] crc_ok,
               bint need_crc, int body_mode, bint decompress, int64_t[:, ::1] keys, unsigned char[::1] out,
               int64_t[::1] ends):
    """One JSON line per column row_lo..row_hi-1 of `c` (the scan's columns) into `out`; `ends[i - row_lo]`
    is where row i's line ends, or `-(that position) - 1` when row i is left to the record path (nothing
    written for it). `lay`: `JSONL_LAYOUT`'s values; `lits`/`lit_at`: `JSONL_TEXTS` for the chunk's file;
    `flag_tab`: each distinct sys flag's text up to the born timestamp (`flag_codes`: a row's); `host_tab`:
    the IPv6 hosts' texts (`born`/`store`: a row's, -1 for IPv4); `dl`: (3, rows) DLedger index, term,
    pos, or None (or (3, 0)); `crc_ok`: the scan's CRC check, computed here when `need_crc`; body_mode 0 none,
    1 hex, 2 text; `keys`: scratch (3, >= pairs a row can have). `out` must hold every line (the caller's
    upper bound). Returns the bytes written. Runs without the GIL."""
    cdef JlCtx x
    cdef JlHost hb, hs
    cdef Py_ssize_t o = 0, i, start, body_pos, body_len, pos, topic_pos, u_at = -1, u_end = -1, ignored, t, sh, r
    cdef int64_t sysf, phys
    cdef bint ok, has_dl = dl is not None and dl.shape[1] > 0
    cdef Py_ssize_t ncol = c.shape[1], dln = dl.shape[1] if has_dl else 0
    cdef const int64_t *col[K_BODY_LEN + 1]  # each column's row (K_POS .. K_BODY_LEN)
    cdef int64_t compressed, v6, v2, host_v4, host_v6
    cdef const int64_t *dlp
    cdef int64_t *ep
    if lay.shape[0] != K_COUNT or lit_at.shape[0] != L_COUNT + 1 or keys.shape[0] != 3 or row_lo < 0 \
            or row_hi > ncol or row_hi - row_lo > ends.shape[0] or min(born.shape[0], store.shape[0],
            flag_codes.shape[0], crc_ok.shape[0]) < row_hi or (has_dl and (dl.shape[0] != 3 or dln < row_hi)) \
            or any(not 0 <= lay[t] < c.shape[0] for t in range(K_BODY_LEN + 1)):
        raise ValueError("json_lines: arguments of the wrong shape")
    if row_hi <= row_lo:
        return 0
    for t in range(K_BODY_LEN + 1):
        col[t] = &c[lay[t], 0]
    compressed, v6, v2 = lay[K_COMPRESSED], lay[K_STOREHOST_V6], lay[K_MAGIC_V2]
    host_v4, host_v6 = lay[K_HOST_V4], lay[K_HOST_V6]
    dlp = &dl[0, 0] if has_dl else NULL
    ep = &ends[0]
    x.a = &a[0] if a.shape[0] else NULL
    x.alen = a.shape[0]
    x.out = &out[0]
    x.olen = out.shape[0]
    x.lits = &lits[0]
    x.lits_len = lits.shape[0]
    x.lit_at = &lit_at[0]
    x.keys = &keys[0, 0]
    x.kcols = keys.shape[1]
    x.uniq_len = lay[K_UNIQ_LEN]
    x.uniq8 = <uint64_t>lay[K_UNIQ8]
    hb.key = hs.key = 0
    hb.at = hb.end = hs.at = hs.end = -1
    with nogil:
        for i in range(row_lo, row_hi):
            start = o
            sysf = col[K_SYS_FLAG][i]
            body_pos = col[K_BODY_POS][i]
            body_len = col[K_BODY_LEN][i]
            if decompress and (sysf & compressed) != 0:
                ep[i - row_lo] = -o - 1
                continue
            pos = col[K_POS][i]
            o = jl_lit_int(&x, o, L_OPEN, base + pos)
            o = jl_lit_int(&x, o, L_POSITION, pos)
            o = jl_lit_int(&x, o, L_TOTAL_SIZE, col[K_TOTAL][i])
            o = jl_lit_int(&x, o, L_MAGIC_V2 if col[K_MAGIC][i] == v2 else L_MAGIC_V1,
                           col[K_BODY_CRC][i])
            ok = crc_ok[i] != 0
            if need_crc and body_len > 0:
                ok = (mq_crc32(0, x.a + body_pos, body_len) & 0x7FFFFFFF) == col[K_BODY_CRC][i]
            o = jl_lit_int(&x, o, L_CRC_TRUE if ok else L_CRC_FALSE, col[K_QUEUE_ID][i])
            o = jl_lit_int(&x, o, L_FLAG, col[K_FLAG][i])
            o = jl_lit_int(&x, o, L_QUEUE_OFFSET, col[K_QUEUE_OFFSET][i])
            o = jl_lit_int(&x, o, L_SYS_FLAG, sysf)
            t = flag_codes[i]
            o = jl_int(&x, jl_put(&x, o, &flag_tab[0], flag_tab.shape[0], flag_at[t], flag_at[t + 1] - flag_at[t]),
                       col[K_BORN_TS][i])
            o = jl_lit(&x, o, L_BORN_HOST)
            o = jl_host(&x, o, col[K_BORN_HOST][i], col[K_BORN_PORT][i], born[i],
                        &host_tab[0], host_tab.shape[0], &host_at[0], &hb)
            o = jl_lit_int(&x, o, L_STORE_TIMESTAMP, col[K_STORE_TS][i])
            o = jl_lit(&x, o, L_STORE_HOST)
            sh = col[K_STORE_HOST][i]
            o = jl_host(&x, o, sh, col[K_STORE_PORT][i], store[i], &host_tab[0], host_tab.shape[0],
                        &host_at[0], &hs)
            o = jl_lit_int(&x, o, L_RECONSUME_TIMES, col[K_RECONSUME][i])
            o = jl_lit_int(&x, o, L_PREPARED, col[K_PREPARED][i])
            o = jl_lit(&x, o, L_TOPIC)
            topic_pos = col[K_TOPIC_POS][i]
            o = jl_str(&x, o, topic_pos, topic_pos + col[K_TOPIC_LEN][i], 256, 256, &ignored)
            if o < 0:
                o = jl_leave(ep, i - row_lo, start, &hb, &hs)
                continue
            o = jl_lit(&x, o, L_PROPERTIES)
            o = jl_properties(&x, o, col[K_PROPS_POS][i], col[K_PROPS_LEN][i], &u_at, &u_end)
            if o < 0:
                o = jl_leave(ep, i - row_lo, start, &hb, &hs)
                continue
            o = jl_lit(&x, o, L_UNIQ_FIELD)
            if u_at >= 0:
                memcpy(x.out + o, x.out + u_at, u_end - u_at)  # the source ends before o
                o = jl_lit(&x, o + u_end - u_at, L_MSG_ID)
            else:
                o = jl_lit(&x, o, L_NULL_MSG_ID)
            o = jl_hex(&x, o, sh, host_v6 if (sysf & v6) != 0 else host_v4,
                       jl_hex_upper)
            phys = col[K_PHYS_FIELD][i]
            for t in range(7, -1, -1):
                r = 2 * ((phys >> (8 * t)) & 255)
                x.out[o] = jl_hex_upper[r]
                x.out[o + 1] = jl_hex_upper[r + 1]
                o += 2
            o = jl_lit_int(&x, o, L_BODY_LENGTH, body_len)
            if body_mode == 0:
                o = jl_lit(&x, o, L_BODY_NULL_DLEDGER if has_dl else L_BODY_NULL_END)
            else:
                o = jl_lit(&x, o, L_BODY)
                if body_mode == 1:
                    x.out[o] = 34
                    o = jl_hex(&x, o + 1, body_pos, body_len, jl_hex_lower)
                    x.out[o] = 34
                    o += 1
                else:
                    o = jl_str(&x, o, body_pos, body_pos + body_len, 256, 256, &ignored)
                    if o < 0:
                        o = jl_leave(ep, i - row_lo, start, &hb, &hs)
                        continue
                o = jl_lit(&x, o, L_DLEDGER if has_dl else L_END)
            if has_dl:
                o = jl_int(&x, o, dlp[i])
                o = jl_lit_int(&x, o, L_TERM, dlp[dln + i])
                o = jl_lit_int(&x, o, L_POS, dlp[2 * dln + i])
                o = jl_lit(&x, o, L_DLEDGER_END)
            ep[i - row_lo] = o
    return o


def int64_stats(const int64_t[::1] v):
    """(sum, min, max, bitwise or) of `v` (0, 0, 0, 0 when empty): a chunk's line sizes and sys flags without
    numpy (`kernels.int64_stats` is the reference)."""
    cdef Py_ssize_t i, n = v.shape[0]
    cdef int64_t s = 0, lo = 0, hi = 0, bits = 0
    if n:
        lo = hi = v[0]
        with nogil:
            for i in range(n):
                s += v[i]
                bits |= v[i]
                if v[i] < lo:
                    lo = v[i]
                if v[i] > hi:
                    hi = v[i]
    return s, lo, hi, bits


def row_checks(const int64_t[::1] pos, const int64_t[::1] phys, const int64_t[::1] body_len,
               const int64_t[::1] crc, const int64_t[::1] body_crc, int64_t base, bint crc_checked,
               unsigned char[::1] crc_ok):
    """The per-record checks of a chunk's rows (`fastscan.record_findings`): `crc_ok[i]` is 1 when row i's body
    CRC matches (an empty body always does, as all rows when the CRC was not checked), and the rows whose
    PHYSICALOFFSET field is not their position or whose CRC does not match, ascending (`kernels.row_checks`)."""
    cdef Py_ssize_t i, n = pos.shape[0], bad = 0
    cdef unsigned char ok
    if phys.shape[0] < n or body_len.shape[0] < n or crc.shape[0] < n or body_crc.shape[0] < n \
            or crc_ok.shape[0] < n:
        raise ValueError("row_checks: columns shorter than pos")
    with nogil:
        for i in range(n):
            ok = not crc_checked or body_len[i] == 0 or crc[i] == body_crc[i]
            crc_ok[i] = ok
            if not ok or phys[i] != pos[i] + base:
                bad += 1
    if not bad:
        return []
    return [i for i in range(n) if not crc_ok[i] or phys[i] != pos[i] + base]
