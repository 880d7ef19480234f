/* The broker's CRC32 (java.util.zip.CRC32, reflected polynomial 0xEDB88320), for every kernel.
 * `mq_crc32(0, p, n) & 0x7FFFFFFF` is UtilAll.crc32. This first version is the plain table loop;
 * a faster implementation replaces the body behind the same signature. */
#ifndef MQTOOL_CRC32_H
#define MQTOOL_CRC32_H
#include <stddef.h>
#include <stdint.h>

static uint32_t mq_crc32_table[256];
static int mq_crc32_ready = 0;

static void mq_crc32_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        mq_crc32_table[i] = c;
    }
    mq_crc32_ready = 1;
}

/* zlib's crc32(crc, buf, len) contract: continue from `crc` (0 to start). Thread-safe after init. */
static uint32_t mq_crc32(uint32_t crc, const unsigned char *p, size_t n) {
    if (!mq_crc32_ready) mq_crc32_init();
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = mq_crc32_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
#endif
