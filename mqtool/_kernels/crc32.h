/* The broker's CRC32 (java.util.zip.CRC32: CRC-32/ISO-HDLC, reflected polynomial 0xEDB88320) for every
 * kernel. `mq_crc32(0, p, n) & 0x7FFFFFFF` is UtilAll.crc32; `mq_crc32(crc, p, n)` continues from `crc`
 * as zlib's crc32 does.
 *
 * Two implementations behind the one signature, chosen once at `mq_crc32_init` by what the CPU has:
 * - folding with carry-less multiplication (PCLMULQDQ), after Intel's white paper "Fast CRC Computation
 *   for Generic Polynomials Using PCLMULQDQ Instruction" (Gopal et al., 2009): four 128-bit lanes fold
 *   64 bytes a step, then fold into one lane; that lane, whose remainder modulo the polynomial equals the
 *   data's, is finished by the table loop below (16 bytes), as is the tail. Where the CPU has VPCLMULQDQ
 *   and AVX2, buffers of 256 bytes and more fold eight 128-bit lanes (four 256-bit registers, 128 bytes a
 *   step) first, the same way;
 * - slicing-by-8 (eight 256-entry tables, eight bytes a step) everywhere else, and for short buffers.
 *
 * The fold constants are x^e mod P for the distances folded, bit-reflected and shifted as the paper's
 * reflected form requires; `tests/native/test_extension.py` checks both paths against zlib on every length
 * 0..300 and on random offsets. */
#ifndef MQTOOL_CRC32_H
#define MQTOOL_CRC32_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t mq_crc32_table[8][256];
static int mq_crc32_ready = 0;
static int mq_crc32_clmul = 0; /* 1: the CPU has PCLMULQDQ and SSE4.1; 2: also VPCLMULQDQ and AVX2 */

static uint32_t mq_crc32_slice8(uint32_t c, const unsigned char *p, size_t n) {
    /* the raw (not inverted) CRC state `c` over n bytes, eight bytes a step */
    while (n && ((uintptr_t)p & 7)) {
        c = mq_crc32_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = mq_crc32_table[7][lo & 0xFF] ^ mq_crc32_table[6][(lo >> 8) & 0xFF] ^
            mq_crc32_table[5][(lo >> 16) & 0xFF] ^ mq_crc32_table[4][lo >> 24] ^
            mq_crc32_table[3][hi & 0xFF] ^ mq_crc32_table[2][(hi >> 8) & 0xFF] ^
            mq_crc32_table[1][(hi >> 16) & 0xFF] ^ mq_crc32_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = mq_crc32_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define MQ_CRC32_HAVE_CLMUL 1
#include <immintrin.h>

/* x^e mod P, reflected and shifted one bit (the paper's k constants for the reflected CRC-32):
 * K1/K2 fold a lane 512 bits ahead (e = 4*128+32, 4*128-32), K3/K4 128 bits ahead (e = 128+32, 128-32). */
#define MQ_K1 0x154442bd4ULL
#define MQ_K2 0x1c6e41596ULL
#define MQ_K3 0x1751997d0ULL
#define MQ_K4 0x0ccaa009eULL
/* the 256-bit path: 1024 bits ahead (e = 8*128+32, 8*128-32) and 256 bits ahead (e = 2*128+32, 2*128-32) */
#define MQ_K1024_LO 0x1e88ef372ULL
#define MQ_K1024_HI 0x14a7fe880ULL
#define MQ_K256_LO 0x0f1da05aaULL
#define MQ_K256_HI 0x15a546366ULL

__attribute__((target("pclmul,sse4.1"))) static inline __m128i mq_fold(__m128i x, __m128i k, __m128i next) {
    /* x times x^(distance) mod P, added to the lane `distance` bits further on */
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

__attribute__((target("pclmul,sse4.1"))) static uint32_t mq_crc32_fold(uint32_t c, const unsigned char *p,
                                                                         size_t n) {
    /* the raw CRC state `c` over n >= 64 bytes */
    const __m128i k12 = _mm_set_epi64x((long long)MQ_K2, (long long)MQ_K1);
    const __m128i k34 = _mm_set_epi64x((long long)MQ_K4, (long long)MQ_K3);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    unsigned char lane[16];
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)c)); /* the state enters as the first four bytes' xor */
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = mq_fold(x0, k12, _mm_loadu_si128((const __m128i *)p));
        x1 = mq_fold(x1, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = mq_fold(x2, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = mq_fold(x3, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x0 = mq_fold(x0, k34, x1);
    x0 = mq_fold(x0, k34, x2);
    x0 = mq_fold(x0, k34, x3);
    while (n >= 16) {
        x0 = mq_fold(x0, k34, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)lane, x0);
    return mq_crc32_slice8(mq_crc32_slice8(0, lane, 16), p, n);
}

__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) static inline __m256i mq_fold256(__m256i x, __m256i k,
                                                                                          __m256i next) {
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)), next);
}

__attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1"))) static uint32_t mq_crc32_fold_wide(uint32_t c,
                                                                                           const unsigned char *p,
                                                                                           size_t n) {
    /* the raw CRC state `c` over n >= 256 bytes: eight lanes, then one (`mq_crc32_fold`'s steps after it) */
    const __m256i k1024 = _mm256_set_epi64x((long long)MQ_K1024_HI, (long long)MQ_K1024_LO,
                                            (long long)MQ_K1024_HI, (long long)MQ_K1024_LO);
    const __m256i k256 = _mm256_set_epi64x((long long)MQ_K256_HI, (long long)MQ_K256_LO, (long long)MQ_K256_HI,
                                           (long long)MQ_K256_LO);
    const __m128i k34 = _mm_set_epi64x((long long)MQ_K4, (long long)MQ_K3);
    __m256i y0 = _mm256_loadu_si256((const __m256i *)p);
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    __m256i y2 = _mm256_loadu_si256((const __m256i *)(p + 64));
    __m256i y3 = _mm256_loadu_si256((const __m256i *)(p + 96));
    __m128i x;
    unsigned char lane[16];
    y0 = _mm256_xor_si256(y0, _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)c)));
    p += 128;
    n -= 128;
    while (n >= 128) {
        y0 = mq_fold256(y0, k1024, _mm256_loadu_si256((const __m256i *)p));
        y1 = mq_fold256(y1, k1024, _mm256_loadu_si256((const __m256i *)(p + 32)));
        y2 = mq_fold256(y2, k1024, _mm256_loadu_si256((const __m256i *)(p + 64)));
        y3 = mq_fold256(y3, k1024, _mm256_loadu_si256((const __m256i *)(p + 96)));
        p += 128;
        n -= 128;
    }
    y0 = mq_fold256(y0, k256, y1);
    y0 = mq_fold256(y0, k256, y2);
    y0 = mq_fold256(y0, k256, y3);
    x = mq_fold(_mm256_castsi256_si128(y0), k34, _mm256_extracti128_si256(y0, 1));
    while (n >= 16) {
        x = mq_fold(x, k34, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)lane, x);
    return mq_crc32_slice8(mq_crc32_slice8(0, lane, 16), p, n);
}
#endif

static void mq_crc32_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        mq_crc32_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            uint32_t c = mq_crc32_table[t - 1][i];
            mq_crc32_table[t][i] = mq_crc32_table[0][c & 0xFF] ^ (c >> 8);
        }
    }
#ifdef MQ_CRC32_HAVE_CLMUL
    __builtin_cpu_init();
    mq_crc32_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (mq_crc32_clmul && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2")) mq_crc32_clmul = 2;
#endif
    mq_crc32_ready = 1;
}

/* zlib's crc32(crc, buf, len) contract: continue from `crc` (0 to start). Thread-safe after init. */
static uint32_t mq_crc32(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t c = ~crc;
    if (!mq_crc32_ready) mq_crc32_init();
#ifdef MQ_CRC32_HAVE_CLMUL
    if (mq_crc32_clmul == 2 && n >= 256) return ~mq_crc32_fold_wide(c, p, n);
    if (mq_crc32_clmul && n >= 64) return ~mq_crc32_fold(c, p, n);
#endif
    return ~mq_crc32_slice8(c, p, n);
}

/* Which implementation `mq_crc32` uses for 256 bytes and more: "vpclmul", "pclmul" or "slice8". */
static const char *mq_crc32_impl(void) {
    if (!mq_crc32_ready) mq_crc32_init();
    return mq_crc32_clmul == 2 ? "vpclmul" : mq_crc32_clmul ? "pclmul" : "slice8";
}
#endif
