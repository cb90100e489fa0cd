/* fuzz_wire.c - libFuzzer target: any body through the scanner, Jansson and
 * the tensor decoder must neither crash nor read out of bounds. */
#include "srv.h"

#include <stdlib.h>
#include <string.h>

srv_config srv_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
            json_decref(root);
        }
    }
    srv_arena_free(&a);
    free(body);
    return 0;
}
