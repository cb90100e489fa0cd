/* b64.c - standard padded base64 (RFC 4648), table-driven: 12 bits per
 * lookup when encoding, four pre-shifted 24-bit tables when decoding, so
 * tensors of megabytes go through at memory-bound speed. */
#include "srv.h"

#include <pthread.h>
#include <string.h>

static const char alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint16_t enc12[4096];        /* two output chars per 12 input bits */
static uint32_t dec[4][256];        /* char -> its 6 bits at each position */
#define BAD 0xff000000u
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
    for (uint32_t v = 0; v < 64; v++) {
        unsigned char c = (unsigned char)alpha[v];
        dec[0][c] = v << 18;
        dec[1][c] = v << 12;
        dec[2][c] = v << 6;
        dec[3][c] = v;
    }
}

size_t srv_b64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

size_t srv_b64_decoded_max(size_t len) { return len / 4 * 3 + 3; }

void srv_b64_encode(const uint8_t *in, size_t n, char *out)
{
    pthread_once(&once, init_tables);
    size_t i = 0;
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

int64_t srv_b64_decode(const char *in, size_t len, uint8_t *out)
{
    pthread_once(&once, init_tables);
    if (len % 4)
        return -1;
    if (len == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)in;
    size_t quads = len / 4 - 1; /* the last quad may carry padding */
    uint8_t *o = out;
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
