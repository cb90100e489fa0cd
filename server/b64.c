/* b64.c - standard padded base64 (RFC 4648), table-driven: 12 bits per
 * lookup when encoding, four pre-shifted 24-bit tables when decoding, so
 * tensors of megabytes go through at memory-bound speed. */
#include "srv.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

static const char alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint16_t enc12[4096];        /* two output chars per 12 input bits */
static uint32_t dec[4][256];        /* char -> its 6 bits at each position */
#define BAD 0xff000000u
static uint8_t vb_lut[128];         /* VBMI decoding: char -> 6 bits, or 0x80 */
static uint8_t vb_pack[64];         /* VBMI decoding: 48 output bytes from 16 lanes */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int i = 0; i < 4096; i++) {
        unsigned char two[2] = {(unsigned char)alpha[i >> 6], (unsigned char)alpha[i & 63]};
        memcpy(&enc12[i], two, 2);
    }
    for (int c = 0; c < 256; c++)
        for (int k = 0; k < 4; k++)
            dec[k][c] = BAD;
    memset(vb_lut, 0x80, sizeof vb_lut);
    for (int j = 0; j < 48; j++) /* lane j/3, its 24 bits high byte first */
        vb_pack[j] = (uint8_t)(j / 3 * 4 + 2 - j % 3);
    for (uint32_t v = 0; v < 64; v++) {
        unsigned char c = (unsigned char)alpha[v];
        vb_lut[c] = (uint8_t)v;
        dec[0][c] = v << 18;
        dec[1][c] = v << 12;
        dec[2][c] = v << 6;
        dec[3][c] = v;
    }
}

size_t srv_b64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

size_t srv_b64_decoded_max(size_t len) { return len / 4 * 3 + 3; }

#ifdef HAVE_AVX2_PATH
/* 48 bytes to 64 characters per step with AVX-512 VBMI (Muła and Lemire, as
 * decode_vbmi): a byte permute puts each 3-byte group's bytes as
 * [b1 b0 b2 b1], one multishift pulls the four 6-bit fields into the low
 * bits of four bytes, and a byte permute of the alphabet translates them.
 * Returns the bytes done (a multiple of 48). */
__attribute__((target("avx512f,avx512bw,avx512vbmi")))
static size_t encode_vbmi(const uint8_t *in, size_t n, char *out)
{
    uint8_t sh[64];
    for (int j = 0; j < 16; j++) {
        sh[4 * j] = (uint8_t)(3 * j + 1);
        sh[4 * j + 1] = (uint8_t)(3 * j);
        sh[4 * j + 2] = (uint8_t)(3 * j + 2);
        sh[4 * j + 3] = (uint8_t)(3 * j + 1);
    }
    const __m512i shuf = _mm512_loadu_si512(sh), lut = _mm512_loadu_si512(alpha);
    const __m512i shifts = _mm512_set1_epi64(0x3036242a1016040aLL);
    size_t i = 0;
    for (; n - i >= 48; i += 48) {
        __m512i v = _mm512_maskz_loadu_epi8(0xffffffffffffULL, in + i);
        v = _mm512_multishift_epi64_epi8(shifts, _mm512_permutexvar_epi8(shuf, v));
        _mm512_storeu_si512(out + i / 3 * 4, _mm512_permutexvar_epi8(v, lut));
    }
    return i;
}
#endif

void srv_b64_encode(const uint8_t *in, size_t n, char *out)
{
    pthread_once(&once, init_tables);
    size_t i = 0;
#ifdef HAVE_AVX2_PATH
    if (n >= 192 && __builtin_cpu_supports("avx512vbmi")) {
        i = encode_vbmi(in, n, out);
        out += i / 3 * 4;
    }
#endif
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        memcpy(out, &enc12[v >> 12], 2);
        memcpy(out + 2, &enc12[v & 4095], 2);
        out += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[0] = alpha[v >> 18];
        out[1] = alpha[(v >> 12) & 63];
        out[2] = out[3] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[0] = alpha[v >> 18];
        out[1] = alpha[(v >> 12) & 63];
        out[2] = alpha[(v >> 6) & 63];
        out[3] = '=';
    }
}

#ifdef HAVE_AVX2_PATH
/* 32 characters to 24 bytes per step, after Muła and Lemire, "Faster Base64
 * Encoding and Decoding Using AVX2 Instructions" (ACM TWEB 2018), as in
 * aklomp/base64's AVX2 decoder: nibble lookups validate and translate,
 * multiply-adds merge the 6-bit fields. Stops at the first block holding
 * anything but the 64 letters (padding, or an invalid byte) and leaves the
 * rest to the scalar loop, which also finds the error. Each store writes 32
 * bytes of which 24 count, so the caller leaves 48 input bytes unread. */
__attribute__((target("avx2")))
static size_t decode_avx2(const unsigned char *in, size_t len, uint8_t *out)
{
    const __m256i lut_lo = _mm256_setr_epi8(
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A,
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
    const __m256i lut_hi = _mm256_setr_epi8(
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
    const __m256i lut_roll = _mm256_setr_epi8(
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i mask_2f = _mm256_set1_epi8(0x2f);
    const __m256i pack = _mm256_setr_epi8(
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1);
    size_t done = 0;
    while (len - done >= 48) {
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(in + done));
        __m256i hi_n = _mm256_and_si256(_mm256_srli_epi32(s, 4), mask_2f);
        __m256i lo_n = _mm256_and_si256(s, mask_2f);
        __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_n);
        __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_n);
        if (!_mm256_testz_si256(lo, hi))
            break;
        __m256i roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(_mm256_cmpeq_epi8(s, mask_2f), hi_n));
        s = _mm256_add_epi8(s, roll);
        s = _mm256_maddubs_epi16(s, _mm256_set1_epi32(0x01400140));
        s = _mm256_madd_epi16(s, _mm256_set1_epi32(0x00011000));
        s = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(s, pack), lanes);
        _mm256_storeu_si256((__m256i *)(void *)(out + done / 4 * 3), s);
        done += 32;
    }
    return done;
}

/* 64 characters to 48 bytes per step with AVX-512 VBMI, after Muła and
 * Lemire, "Base64 encoding and decoding at almost the speed of a memory
 * copy" (SP&E 2020): one two-table byte permute translates (and marks with
 * 0x80 anything but the 64 letters, bytes >= 0x80 through their own sign
 * bit), the same multiply-adds as above merge the fields, one byte permute
 * packs. Stops at the first block holding anything else, as decode_avx2;
 * stores are masked to the 48 bytes, and the last 4 characters are left to
 * the scalar loop (they may carry padding). */
__attribute__((target("avx512f,avx512bw,avx512vbmi")))
static size_t decode_vbmi(const unsigned char *in, size_t len, uint8_t *out)
{
    const __m512i lut_lo = _mm512_loadu_si512(vb_lut), lut_hi = _mm512_loadu_si512(vb_lut + 64);
    const __m512i pack = _mm512_loadu_si512(vb_pack);
    const __m512i m1 = _mm512_set1_epi32(0x01400140), m2 = _mm512_set1_epi32(0x00011000);
    size_t done = 0;
    while (len - done >= 68) {
        __m512i s = _mm512_loadu_si512(in + done);
        __m512i t = _mm512_permutex2var_epi8(lut_lo, s, lut_hi);
        if (_mm512_movepi8_mask(_mm512_or_si512(s, t)))
            break;
        t = _mm512_madd_epi16(_mm512_maddubs_epi16(t, m1), m2);
        _mm512_mask_storeu_epi8(out + done / 4 * 3, 0xffffffffffffULL, _mm512_permutexvar_epi8(pack, t));
        done += 64;
    }
    return done;
}
#endif

int64_t srv_b64_decode(const char *in, size_t len, uint8_t *out)
{
    pthread_once(&once, init_tables);
    if (len % 4)
        return -1;
    if (len == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)in;
    uint8_t *o = out;
#ifdef HAVE_AVX2_PATH
    if (len >= 256) {
        size_t done = __builtin_cpu_supports("avx512vbmi") ? decode_vbmi(p, len, out)
                    : __builtin_cpu_supports("avx2") ? decode_avx2(p, len, out) : 0;
        p += done;
        o += done / 4 * 3;
    }
#endif
    size_t quads = (len - (size_t)((const char *)p - in)) / 4 - 1; /* the last quad may carry padding */
    for (size_t q = 0; q < quads; q++, p += 4) {
        uint32_t v = dec[0][p[0]] | dec[1][p[1]] | dec[2][p[2]] | dec[3][p[3]];
        if (v & BAD)
            return -1;
        o[0] = (uint8_t)(v >> 16);
        o[1] = (uint8_t)(v >> 8);
        o[2] = (uint8_t)v;
        o += 3;
    }
    int pad = (p[3] == '=') + (p[3] == '=' && p[2] == '=');
    if (p[2] == '=' && p[3] != '=')
        return -1;
    uint32_t v = dec[0][p[0]] | dec[1][p[1]];
    if (pad < 2)
        v |= dec[2][p[2]];
    if (pad < 1)
        v |= dec[3][p[3]];
    if (v & BAD)
        return -1;
    *o++ = (uint8_t)(v >> 16);
    if (pad < 2)
        *o++ = (uint8_t)(v >> 8);
    if (pad < 1)
        *o++ = (uint8_t)v;
    return (int64_t)(o - out);
}
