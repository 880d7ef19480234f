# The body CRC of `messages --format parquet` (`inspect/parquet.py`) where the scan did not compute it;
# its reference is the record path's `crc_ok` (zlib.crc32 of each body).
from libc.stdint cimport int64_t


cdef int check_spans(Py_ssize_t size, const int64_t[::1] pos, const int64_t[::1] lens) except -1:
    """IndexError unless each span pos[i]:pos[i] + lens[i] lies in a buffer of `size` bytes (as the
    plain-Python references index them)."""
    cdef Py_ssize_t i
    if lens.shape[0] != pos.shape[0]:
        raise ValueError("positions and lengths differ in number")
    for i in range(pos.shape[0]):
        if pos[i] < 0 or lens[i] < 0 or pos[i] > size - lens[i]:
            raise IndexError(f"span {pos[i]}:{pos[i] + lens[i]} outside a buffer of {size} bytes")
    return 0


def body_crcs(const unsigned char[::1] a, const int64_t[::1] pos, const int64_t[::1] lens, int64_t[::1] out):
    """out[i]: the broker's CRC of a[pos[i]:pos[i] + lens[i]] (`UtilAll.crc32`: CRC32 & 0x7FFFFFFF), 0 for
    an empty body. Runs without the GIL."""
    cdef Py_ssize_t i, n = pos.shape[0]
    check_spans(a.shape[0], pos, lens)
    if out.shape[0] < n:
        raise ValueError("out is shorter than pos")
    with nogil:
        for i in range(n):
            out[i] = 0
            if lens[i] > 0:
                out[i] = mq_crc32(0, &a[0] + pos[i], lens[i]) & 0x7FFFFFFF
