/* fuzz_wire.c - libFuzzer target: any body through the scanner, Jansson and
 * the tensor decoder must neither crash nor read out of bounds; and the
 * input's start, read as a number by srv_parse_float (at the input's end
 * and padded, as in a body), must give strtof's float for the text it
 * consumed (abort otherwise: a crash the fuzzer reports). */
#include "srv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void number_vs_strtof(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 65);
    if (!t)
        return;
    memcpy(t, data, size);
    memset(t + size, ']', 64);
    t[size + 64] = '\0';
    for (int padded = 0; padded < 2; padded++) {
        float got;
        int fin;
        const char *e = srv_parse_float(t, t + size + (padded ? 64 : 0), &got, &fin);
        if (!e)
            continue;
        size_t n = (size_t)(e - t);
        char *s = malloc(n + 1);
        if (!s)
            break;
        memcpy(s, t, n);
        s[n] = '\0';
        float want = strtof(s, NULL);
        if (memcmp(&got, &want, sizeof got) || fin != !!isfinite(want)) {
            fprintf(stderr, "srv_parse_float(\"%s\") = %a, strtof %a\n", s, got, want);
            abort();
        }
        free(s);
    }
    free(t);
}

srv_config srv_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4096)
        number_vs_strtof(data, size);
    char *body = malloc(size + 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    body[size] = '\0';
    srv_arena a = {0};
    srv_scan_result sr;
    if (srv_scan(body, size, &a, &sr) == 0) {
        json_error_t je;
        json_t *root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, &je);
        if (root) {
            srv_codec c = {&a, &sr, (int64_t)1 << 20};
            attn_tensor t;
            attn_mask m;
            srv_err e;
            uint64_t u;
            srv_decode_tensor(&c, json_object_get(root, "query"), "query", &t, &e);
            srv_decode_mask(&c, json_object_get(root, "mask"), "mask", &m, &e);
            srv_json_u64(json_object_get(root, "seed"), &u);
            float f;
            srv_json_scalar(json_object_get(root, "scale"), &f);
            json_decref(root);
        }
    }
    srv_arena_free(&a);
    free(body);
    return 0;
}
