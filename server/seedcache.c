/* seedcache.c - seeded parameter sets shared across requests. Seeding is a
 * pure function of the seed and a few sizes (attn.h, "Seeded parameters"),
 * and a multi-head request that sends no params would otherwise draw 4*E*E
 * floats (4 MiB at E = 512) into fresh memory on every call. The last few
 * sets are kept, reference-counted, keyed by exactly those inputs. A kept
 * multi-head set also gets prepared weights (attn_mha_weights_new), made
 * by the first request that finds the set here, so that the requests after
 * it skip packing the projection matrices (the same bits, attn.h says). */
#include "srv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 4
/* Larger sets (16 MiB+) are not kept, and a set's prepared weights (a copy
 * and the packed matrices, about twice the set) only while set and weights
 * together stay within it: at E = 512, 1.05M + 2.1M floats. */
#define CACHE_MAX_FLOATS ((int64_t)4 << 20)

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
    /* Multi-head only: prepared weights made from set, once (under mu:
     * prep, then prepared). Read-only once made, freed with the set. */
    enum { PREP_NONE, PREP_MAKING, PREP_DONE } prep;
    attn_mha_weights *prepared; /* NULL until made, or when they cannot be */
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
        attn_mha_weights_free(s->prepared);
        attn_param_set_free(s->set);
        free(s);
    }
}

/* What the job's seeded set depends on: the rule, Dq, Dk, Dv, Lv, Dh and
 * Dout, or E, kdim, vdim, H, Hkv, residual_norm and a learned positional
 * table's rows; ranks too (a superset of the inputs). */
static void job_key(const srv_job *j, seed_key *k)
{
    memset(k, 0, sizeof *k);
    k->seed = j->seed;
    if (j->kind == SRV_JOB_MULTIHEAD) {
        const attn_mha_request *r = &j->u.mha;
        k->kind = 1;
        k->dims[0] = last(&r->query, 1);
        k->dims[1] = last(&r->key, 1);
        k->dims[2] = last(&r->value, 1);
        k->dims[3] = r->num_heads;
        k->dims[4] = r->num_kv_heads;
        k->dims[5] = r->residual_norm;
        k->dims[6] = (int64_t)r->query.rank << 16 | (int64_t)r->key.rank << 8 | r->value.rank;
        if (r->positional_encoding == ATTN_PE_LEARNED) { /* a table of max(Lq, Lk) rows */
            int64_t lq = last(&r->query, 2), lk = r->key.rank ? last(&r->key, 2) : lq;
            k->dims[7] = lq > lk ? lq : lk;
        }
        return;
    }
    const attn_request *r = &j->u.att;
    k->rule = (int)r->rule;
    k->dims[0] = last(&r->query, 1);
    k->dims[1] = last(&r->key, 1);
    k->dims[2] = last(&r->value, 1);
    k->dims[3] = last(&r->value, 2);
    k->dims[4] = r->hidden_size;
    k->dims[5] = r->output_size;
    k->dims[6] = (int64_t)r->query.rank << 16 | (int64_t)r->key.rank << 8 | r->value.rank;
}

/* The cached set for key, as a new reference, or NULL. */
static srv_seeded *find(const seed_key *key)
{
    srv_seeded *s = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < CACHE_SLOTS && !s; i++)
        if (slots[i] && memcmp(&slots[i]->key, key, sizeof *key) == 0) {
            s = slots[i];
            s->refs++;
            s->used = ++clock_;
        }
    pthread_mutex_unlock(&mu);
    return s;
}

/* Puts s in the cache, in place of the least recently used set. */
static void keep(srv_seeded *s)
{
    if (s->floats > CACHE_MAX_FLOATS)
        return;
    pthread_mutex_lock(&mu);
    int victim = -1;
    for (int i = 0; i < CACHE_SLOTS && victim < 0; i++)
        if (!slots[i])
            victim = i;
        else if (memcmp(&slots[i]->key, &s->key, sizeof s->key) == 0)
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
}

/* The prepared weights of s, a multi-head set found in the cache, made
 * here from j's request with s's parameters unless another request made or
 * is making them. They are only an optimisation: when they cannot be made
 * or would not fit the set's share of memory, requests use the set. */
static void prepare(srv_seeded *s, const srv_job *j)
{
    if (j->kind != SRV_JOB_MULTIHEAD)
        return;
    pthread_mutex_lock(&mu);
    int mine = s->prep == PREP_NONE;
    if (mine)
        s->prep = PREP_MAKING;
    pthread_mutex_unlock(&mu);
    if (!mine)
        return;
    attn_mha_weights *w = NULL;
    if (s->floats <= CACHE_MAX_FLOATS / 2) { /* the copy alone is s->floats */
        attn_mha_request r = j->u.mha;
        r.params = s->set->items;
        r.n_params = s->set->n;
        r.weights = NULL;
        attn_error ae = {{0}, {0}};
        if (attn_mha_weights_new(&r, &w, &ae) != ATTN_OK)
            w = NULL;
        else if ((int64_t)(attn_mha_weights_bytes(w) / sizeof(float)) > CACHE_MAX_FLOATS - s->floats) {
            attn_mha_weights_free(w);
            w = NULL;
        }
    }
    pthread_mutex_lock(&mu);
    s->prepared = w;
    s->prep = PREP_DONE;
    pthread_mutex_unlock(&mu);
}

attn_status srv_seed_job(const srv_job *j, srv_seeded **out, attn_error *ae)
{
    seed_key key;
    job_key(j, &key);
    if ((*out = find(&key))) {
        prepare(*out, j);
        return ATTN_OK;
    }
    srv_seeded *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(ae->field, sizeof ae->field, "params");
        snprintf(ae->message, sizeof ae->message, "out of memory seeding the parameters");
        return ATTN_ERR_TOO_LARGE;
    }
    attn_varlen_request vr;
    if (j->cu_q)
        srv_varlen_request(j, &vr);
    attn_status st = j->kind == SRV_JOB_MULTIHEAD
                         ? attn_mha_seed_params(&j->u.mha, j->seed, &s->set, ae)
                   : j->cu_q ? attn_varlen_seed_params(&vr, j->seed, &s->set, ae)
                             : attn_seed_params(&j->u.att, j->seed, &s->set, ae);
    if (st != ATTN_OK) {
        free(s);
        return st;
    }
    s->key = key;
    s->refs = 1;
    s->floats = set_floats(s->set);
    *out = s;
    keep(s);
    return ATTN_OK;
}

const attn_param_set *srv_seeded_set(const srv_seeded *s) { return s->set; }

const attn_mha_weights *srv_seeded_weights(const srv_seeded *s)
{
    if (!s)
        return NULL;
    pthread_mutex_lock(&mu);
    const attn_mha_weights *w = s->prepared;
    pthread_mutex_unlock(&mu);
    return w;
}

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
