# The simulator's event lines (`mqtool/simulate/eventlines.py` is the reference and the fallback).
#
# Input: orjson's text of a list of batches `[[kind, [column 0], [column 1], ...], ...]`, every column of a
# batch with one value per event. Output: a line per event, the kind's fixed pieces around each column's
# value text, copied as orjson wrote it (the bytes `json` writes for these values). A value's end is found
# by walking the JSON (strings with their escapes, nested objects), so a comma or bracket inside a string
# is no special case. Runs on the event writer thread with the GIL released.
from libc.stdint cimport int64_t
from libc.string cimport memcpy

cdef enum:
    EV_TOO_SMALL = -1
    EV_MALFORMED = -2
    EV_SCRATCH = -3


cdef inline Py_ssize_t _ev_skip(const unsigned char *src, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """The index after the JSON value starting at `src[i]` (orjson's text: no white space), at most `n`."""
    cdef unsigned char c = src[i]
    cdef Py_ssize_t depth = 0
    cdef bint string = False
    if c == 34:  # a string: to its closing quote; a backslash escapes the next byte
        i += 1
        while i < n:
            c = src[i]
            if c == 92:
                i += 2
            elif c == 34:
                return i + 1
            else:
                i += 1
        return n
    if c == 123 or c == 91:  # an object or array: to its matching bracket, strings skipped whole
        while i < n:
            c = src[i]
            if string:
                if c == 92:
                    i += 1
                elif c == 34:
                    string = False
            elif c == 34:
                string = True
            elif c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n
    while i < n:  # a number, true, false, null
        c = src[i]
        if c == 44 or c == 93 or c == 125:
            return i
        i += 1
    return n


cdef Py_ssize_t _ev_format(const unsigned char *src, Py_ssize_t n, const unsigned char *pieces,
                           const int64_t *poff, const int64_t *kfirst, Py_ssize_t nkinds, int64_t *spans,
                           Py_ssize_t nspans, unsigned char *out, Py_ssize_t cap) noexcept nogil:
    cdef Py_ssize_t i = 1, o = 0, s, e, a, b, j, k, r, first, kid, digits, rows, at
    if n < 2 or src[0] != 91 or src[n - 1] != 93:
        return EV_MALFORMED
    while i < n - 1:
        if src[i] == 44:
            i += 1
            continue
        if src[i] != 91:
            return EV_MALFORMED
        i += 1
        kid = 0
        digits = 0
        while i < n and 48 <= src[i] <= 57 and digits < 9:
            kid = kid * 10 + (src[i] - 48)
            i += 1
            digits += 1
        if digits == 0 or kid >= nkinds:
            return EV_MALFORMED
        first = kfirst[kid]
        k = kfirst[kid + 1] - first - 1  # the kind's columns: one piece before each, one after the last
        if k < 1:
            return EV_MALFORMED
        rows = 0
        for j in range(k):  # each value's text, column by column: spans[2 * (j * rows + r)], its end after it
            if i + 1 >= n or src[i] != 44 or src[i + 1] != 91:
                return EV_MALFORMED
            i += 2
            r = 0
            while i < n and src[i] != 93:
                if j and r >= rows:  # a column longer than the first
                    return EV_MALFORMED
                at = 2 * (j * rows + r)
                if at + 1 >= nspans:
                    return EV_SCRATCH
                e = _ev_skip(src, i, n)
                spans[at] = i
                spans[at + 1] = e
                r += 1
                if e < n and src[e] == 44:
                    e += 1
                elif e >= n or src[e] != 93:
                    return EV_MALFORMED
                i = e
            if i >= n or (j and r != rows):  # unclosed, or a column shorter than the first
                return EV_MALFORMED
            if j == 0:
                rows = r
            i += 1
        if i >= n or src[i] != 93:
            return EV_MALFORMED
        i += 1
        for r in range(rows):  # a line per event: the kind's pieces around a value of each column
            for j in range(k + 1):
                a = poff[first + j]
                b = poff[first + j + 1]
                if j < k:
                    at = 2 * (j * rows + r)
                    s = spans[at]
                    e = spans[at + 1]
                else:
                    s = e = 0
                if o + (b - a) + (e - s) > cap:
                    return EV_TOO_SMALL
                memcpy(out + o, pieces + a, b - a)
                o += b - a
                memcpy(out + o, src + s, e - s)
                o += e - s
    return o


def event_lines(const unsigned char[::1] src, const unsigned char[::1] pieces, const int64_t[::1] poff,
                const int64_t[::1] kfirst, int64_t[::1] spans, unsigned char[::1] out):
    """The lines of orjson's text `src` written to `out`: their length, or -1 when `out` is too small, -2
    when `src` is not the text described above, -3 when `spans` (scratch: two slots per value of a batch)
    is. Kind `t`'s pieces are `pieces[poff[p]:poff[p + 1]]` for `p` in `kfirst[t]` .. `kfirst[t + 1] - 1`."""
    cdef Py_ssize_t r
    if kfirst.shape[0] < 1 or pieces.shape[0] == 0 or poff.shape[0] == 0:
        return EV_MALFORMED
    with nogil:
        r = _ev_format(&src[0] if src.shape[0] else NULL, src.shape[0], &pieces[0], &poff[0], &kfirst[0],
                       kfirst.shape[0] - 1, &spans[0] if spans.shape[0] else NULL, spans.shape[0],
                       &out[0] if out.shape[0] else NULL, out.shape[0])
    return r

