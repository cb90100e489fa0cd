/* seedcache.c - seeded parameter sets shared across requests. Seeding is a
 * pure function of the seed and a few sizes (attn.h, "Seeded parameters"),
 * and a multi-head request that sends no params would otherwise draw 4*E*E
 * floats (4 MiB at E = 512) into fresh memory on every call. The last few
 * sets are kept, reference-counted, keyed by exactly those inputs. */
#include "srv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 4
#define CACHE_MAX_FLOATS ((int64_t)4 << 20) /* larger sets (16 MiB+) are not kept */

/* What a seeded set depends on; zero-filled before use so memcmp works. */
typedef struct {
    int kind;             /* 0 attention rule, 1 multi-head */
    int rule;
    uint64_t seed;
    int64_t dims[8];
} seed_key;

struct srv_seeded {
    seed_key key;
    attn_param_set *set;
    int refs;             /* holders, the cache's own slot included */
    int cached;
    int64_t floats;
    uint64_t used;        /* LRU clock */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static srv_seeded *slots[CACHE_SLOTS];
static uint64_t clock_;

static int64_t last(const attn_tensor *t, int from_end)
{
    return t->rank >= from_end ? t->shape[t->rank - from_end] : -1;
}

static int64_t set_floats(const attn_param_set *s)
{
    int64_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        int64_t c = 1;
        for (int d = 0; d < s->items[i].t.rank; d++)
            if (!attn_size_mul(c, s->items[i].t.shape[d], &c))
                return INT64_MAX;
        if (c > INT64_MAX - n)
            return INT64_MAX;
        n += c;
    }
    return n;
}

static void drop(srv_seeded *s) /* with mu held */
{
    if (--s->refs == 0) {
        attn_param_set_free(s->set);
        free(s);
    }
}

/* Finds key in the cache (a new reference) or makes the set with make. */
static attn_status lookup(const seed_key *key, attn_status (*make)(const void *, uint64_t,
                          attn_param_set **, attn_error *), const void *req,
                          srv_seeded **out, attn_error *ae)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i] && memcmp(&slots[i]->key, key, sizeof *key) == 0) {
            slots[i]->refs++;
            slots[i]->used = ++clock_;
            *out = slots[i];
            pthread_mutex_unlock(&mu);
            return ATTN_OK;
        }
    pthread_mutex_unlock(&mu);

    srv_seeded *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(ae->field, sizeof ae->field, "params");
        snprintf(ae->message, sizeof ae->message, "out of memory seeding the parameters");
        return ATTN_ERR_TOO_LARGE;
    }
    attn_status st = make(req, key->seed, &s->set, ae);
    if (st != ATTN_OK) {
        free(s);
        return st;
    }
    s->key = *key;
    s->refs = 1;
    s->floats = set_floats(s->set);
    *out = s;
    if (s->floats > CACHE_MAX_FLOATS)
        return ATTN_OK;
    pthread_mutex_lock(&mu);
    int victim = -1;
    for (int i = 0; i < CACHE_SLOTS && victim < 0; i++)
        if (!slots[i])
            victim = i;
        else if (memcmp(&slots[i]->key, key, sizeof *key) == 0)
            victim = -2; /* another thread made it meanwhile: keep theirs */
    if (victim == -1) {
        victim = 0;
        for (int i = 1; i < CACHE_SLOTS; i++)
            if (slots[i]->used < slots[victim]->used)
                victim = i;
    }
    if (victim >= 0) {
        if (slots[victim])
            drop(slots[victim]);
        s->refs++;
        s->used = ++clock_;
        slots[victim] = s;
    }
    pthread_mutex_unlock(&mu);
    return ATTN_OK;
}

static attn_status make_attention(const void *req, uint64_t seed, attn_param_set **out, attn_error *ae)
{
    return attn_seed_params(req, seed, out, ae);
}

static attn_status make_multihead(const void *req, uint64_t seed, attn_param_set **out, attn_error *ae)
{
    return attn_mha_seed_params(req, seed, out, ae);
}

attn_status srv_seed_attention(const attn_request *req, uint64_t seed, srv_seeded **out,
                               attn_error *ae)
{
    /* rule, Dq, Dk, Dv, Lv, Dh, Dout (ranks too: a superset of the inputs) */
    seed_key k;
    memset(&k, 0, sizeof k);
    k.kind = 0;
    k.rule = (int)req->rule;
    k.seed = seed;
    k.dims[0] = last(&req->query, 1);
    k.dims[1] = last(&req->key, 1);
    k.dims[2] = last(&req->value, 1);
    k.dims[3] = last(&req->value, 2);
    k.dims[4] = req->hidden_size;
    k.dims[5] = req->output_size;
    k.dims[6] = (int64_t)req->query.rank << 16 | (int64_t)req->key.rank << 8 | req->value.rank;
    return lookup(&k, make_attention, req, out, ae);
}

attn_status srv_seed_multihead(const attn_mha_request *req, uint64_t seed, srv_seeded **out,
                               attn_error *ae)
{
    /* E, kdim, vdim, H, Hkv and residual_norm (ranks too) */
    seed_key k;
    memset(&k, 0, sizeof k);
    k.kind = 1;
    k.seed = seed;
    k.dims[0] = last(&req->query, 1);
    k.dims[1] = last(&req->key, 1);
    k.dims[2] = last(&req->value, 1);
    k.dims[3] = req->num_heads;
    k.dims[4] = req->num_kv_heads;
    k.dims[5] = req->residual_norm;
    k.dims[6] = (int64_t)req->query.rank << 16 | (int64_t)req->key.rank << 8 | req->value.rank;
    return lookup(&k, make_multihead, req, out, ae);
}

const attn_param_set *srv_seeded_set(const srv_seeded *s) { return s->set; }

void srv_seeded_release(srv_seeded *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&mu);
    drop(s);
    pthread_mutex_unlock(&mu);
}

void srv_seed_cache_clear(void)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i]) {
            drop(slots[i]);
            slots[i] = NULL;
        }
    pthread_mutex_unlock(&mu);
}
