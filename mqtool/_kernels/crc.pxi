# The broker's CRC32, shared by every kernel (`crc32.h`).
from libc.stdint cimport uint32_t


cdef extern from "crc32.h" nogil:
    void mq_crc32_init()
    uint32_t mq_crc32(uint32_t crc, const unsigned char *p, size_t n)

mq_crc32_init()


def crc32(const unsigned char[::1] data, uint32_t crc=0):
    """zlib.crc32's contract over a contiguous buffer (the broker masks it with 0x7FFFFFFF)."""
    with nogil:
        crc = mq_crc32(crc, &data[0] if data.shape[0] else NULL, data.shape[0])
    return crc
