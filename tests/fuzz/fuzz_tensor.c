/* fuzz_tensor.c - libFuzzer target: tensor and mask decoding in all three
 * forms (nested, flat {shape,data}, {shape,dtype,b64}), through the
 * scanner's fast path and through Jansson alone; a decoded tensor must
 * have exactly the elements its shape says, all finite. */
#include "fuzz_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes every member of obj as a tensor and as a mask; checks results. */
static void decode_all(srv_codec *c, json_t *obj)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        attn_tensor t;
        attn_mask m;
        srv_err e;
        if (srv_decode_tensor(c, v, key, &t, &e) == 0) {
            int64_t n = 1;
            if (t.rank < 1 || t.rank > ATTN_MAX_RANK)
                abort();
            for (int i = 0; i < t.rank; i++) {
                if (t.shape[i] < 1)
                    abort();
                n *= t.shape[i];
            }
            if (n > c->max_elements)
                abort(); /* the cap was not applied */
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(t.data[i]))
                    abort();
            /* the encoder must accept what the decoder produced */
            srv_buf b = {0};
            srv_encode_tensor(&b, t.data, t.rank, t.shape, (int)(n & 1));
            srv_buf_free(&b);
        } else if (e.status < 400 || e.status > 503 || !e.code || !e.message[0]) {
            abort(); /* every failure is a contract error with words */
        }
        if (srv_decode_mask(c, v, key, &m, &e) == 0) {
            int64_t n = 1;
            for (int i = 0; i < m.rank; i++)
                n *= m.shape[i];
            for (int64_t i = 0; i < n; i++)
                if (m.data[i] > 1)
                    abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_config();
    char *body = malloc(size + 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    body[size] = '\0';
    if (srv_json_too_deep(body, size, srv_cfg.max_depth)) {
        free(body);
        return 0;
    }
    /* 1: the server's path, big arrays lifted out by the scanner */
    srv_arena a = {0};
    srv_scan_result sr;
    if (srv_scan(body, size, &a, &sr) == 0) {
        json_t *root = json_loadb(sr.envelope, sr.envelope_len, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(root)) {
            srv_codec c = {&a, &sr, srv_cfg.max_elements};
            decode_all(&c, root);
        }
        json_decref(root);
    }
    srv_arena_free(&a);
    /* 2: Jansson alone, so the codec's slow path sees every input too */
    srv_arena a2 = {0};
    srv_scan_result none;
    memset(&none, 0, sizeof none);
    json_t *root = json_loadb(body, size, JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object(root)) {
        srv_codec c = {&a2, &none, srv_cfg.max_elements};
        decode_all(&c, root);
    }
    json_decref(root);
    srv_arena_free(&a2);
    free(body);
    return 0;
}
