# The broker's CRC32, shared by every kernel (`crc32.h`).
from libc.stdint cimport uint32_t


cdef extern from "crc32.h" nogil:
    void mq_crc32_init()
    uint32_t mq_crc32(uint32_t crc, const unsigned char *p, size_t n)
    uint32_t mq_crc32_slice8(uint32_t c, const unsigned char *p, size_t n)
    const char *mq_crc32_impl()

mq_crc32_init()


def crc32(const unsigned char[::1] data, uint32_t crc=0):
    """zlib.crc32's contract over a contiguous buffer (the broker masks it with 0x7FFFFFFF)."""
    with nogil:
        crc = mq_crc32(crc, &data[0] if data.shape[0] else NULL, data.shape[0])
    return crc


def crc32_tables(const unsigned char[::1] data, uint32_t crc=0):
    """`crc32` by the slicing-by-8 tables alone (the path of a CPU without PCLMULQDQ; for the tests)."""
    with nogil:
        crc = ~mq_crc32_slice8(~crc, &data[0] if data.shape[0] else NULL, data.shape[0])
    return crc


CRC32_IMPLEMENTATION = mq_crc32_impl().decode()
"""What `crc32` runs for 256 bytes and more on this CPU: "vpclmul", "pclmul" or "slice8"."""
