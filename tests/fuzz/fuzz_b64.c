/* fuzz_b64.c - libFuzzer target: base64 decoding of any text stays within
 * srv_b64_decoded_max, and encode-then-decode gives back the bytes. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_config();
    /* any text as base64: exact-size buffer so ASan sees any overrun */
    size_t max = srv_b64_decoded_max(size);
    uint8_t *out = malloc(max ? max : 1);
    if (!out)
        return 0;
    int64_t n = srv_b64_decode((const char *)data, size, out);
    if (n > (int64_t)max || n < -1)
        abort();
    if (n >= 0) {
        /* canonical input re-encodes to itself, other valid input at least
         * decodes to the same bytes */
        char *text = malloc(srv_b64_encoded_len((size_t)n) + 1);
        uint8_t *back = malloc(max ? max : 1);
        if (text && back) {
            srv_b64_encode(out, (size_t)n, text);
            int64_t m = srv_b64_decode(text, srv_b64_encoded_len((size_t)n), back);
            if (m != n || memcmp(back, out, (size_t)n) != 0)
                abort();
        }
        free(text);
        free(back);
    }
    free(out);
    /* the input as bytes: round trip */
    size_t el = srv_b64_encoded_len(size);
    char *enc = malloc(el + 1);
    uint8_t *dec = malloc(srv_b64_decoded_max(el) + 1);
    if (enc && dec) {
        srv_b64_encode(data, size, enc);
        int64_t m = srv_b64_decode(enc, el, dec);
        if (m != (int64_t)size || (size && memcmp(dec, data, size) != 0))
            abort();
    }
    free(enc);
    free(dec);
    return 0;
}
