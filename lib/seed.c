/* seed.c - SplitMix64 and the deterministic nn.Linear-style parameters of
 * each rule, drawn exactly as documented at the bottom of attn.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number
 * generators"), the constants of Java's SplittableRandom. */
uint64_t attn_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A float in [-bound, bound) drawn as documented in attn.h. u has 24
 * random bits, so u, 2u and 2u - 1 are exact in float and the one rounding
 * is the final multiply: the same bits on every platform. */
static float seed_uniform(uint64_t *state, float bound)
{
    float u = (float)(attn_splitmix64(state) >> 40) * 0x1p-24f;
    return (2.0f * u - 1.0f) * bound;
}

/* A normal(0, 1) float drawn as documented in attn.h: Box-Muller (cosine
 * branch) from two draws, in double: u1 in (0, 1] so the log is finite.
 * Only log and cos may differ in the last bit between C libraries. */
static float seed_normal(uint64_t *state)
{
    double u1 = (double)((attn_splitmix64(state) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(attn_splitmix64(state) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2));
}

void attn_param_set_free(attn_param_set *set)
{
    free(set); /* items and data live in the same block */
}

attn_status attn_seed_size(const attn_seed_spec *specs, size_t n, int64_t *total,
                           attn_error *err)
{
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t c;
        if (!attn_count(specs[i].rank, specs[i].shape, &c) || c > INT64_MAX - *total)
            return attn_fail(err, ATTN_ERR_TOO_LARGE, "params",
                             "the parameter %s would be too large", specs[i].name);
        *total += c;
    }
    int64_t bytes;
    if (!attn_size_mul(*total, (int64_t)sizeof(float), &bytes))
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "params", "the parameters would be too large");
    return ATTN_OK;
}

attn_status attn_seed_count(const attn_seed_spec *specs, size_t n, double *floats,
                            attn_error *err)
{
    int64_t total;
    *floats = attn_seed_floats(specs, n);
    return attn_seed_size(specs, n, &total, err);
}

attn_status attn_seed_build(const attn_seed_spec *specs, size_t n, uint64_t seed,
                            attn_param_set **out, attn_error *err)
{
    int64_t total;
    attn_status st = attn_seed_size(specs, n, &total, err);
    if (st != ATTN_OK)
        return st;
    int64_t bytes_data;
    if (!attn_size_mul(total, (int64_t)sizeof(float), &bytes_data) ||
        (uint64_t)bytes_data > SIZE_MAX - sizeof(attn_param_set) - (n + 1) * sizeof(attn_named) - 64)
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "params", "the parameters would be too large");
    size_t head = sizeof(attn_param_set) + n * sizeof(attn_named);
    head = (head + 63) & ~(size_t)63;
    char *block = malloc(head + (size_t)bytes_data + 1);
    if (!block)
        /* The sizes come from the request (hidden_size, output_size), so
         * this is the request being too large rather than the server ill. */
        return attn_fail(err, ATTN_ERR_TOO_LARGE, "params",
                         "the parameters (%lld floats) are too large to allocate",
                         (long long)total);
    attn_param_set *set = (attn_param_set *)(void *)block;
    set->n = n;
    set->items = (attn_named *)(void *)(block + sizeof(attn_param_set));
    attn_seed_fill(specs, n, seed, set->items, (float *)(void *)(block + head));
    *out = set;
    return ATTN_OK;
}

void attn_seed_fill(const attn_seed_spec *specs, size_t n, uint64_t seed, attn_named *items,
                    float *data)
{
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        const attn_seed_spec *sp = &specs[i];
        int64_t c = 1;
        attn_count(sp->rank, sp->shape, &c);
        attn_named *it = &items[i];
        it->name = sp->name;
        memset(&it->t, 0, sizeof it->t);
        it->t.rank = sp->rank;
        for (int r = 0; r < sp->rank; r++)
            it->t.shape[r] = sp->shape[r];
        it->t.data = data;
        if (sp->init == ATTN_INIT_UNIFORM) {
            float bound = 1.0f / sqrtf((float)sp->fan_in);
            for (int64_t e = 0; e < c; e++)
                data[e] = seed_uniform(&state, bound);
        } else if (sp->init == ATTN_INIT_NORMAL) {
            for (int64_t e = 0; e < c; e++)
                data[e] = seed_normal(&state);
        } else {
            float fill = sp->init == ATTN_INIT_ONES ? 1.0f : 0.0f;
            for (int64_t e = 0; e < c; e++)
                data[e] = fill;
        }
        data += c;
    }
}

static attn_seed_spec spec1(const char *name, int64_t n0, int64_t fan_in)
{
    attn_seed_spec s = {name, 1, {n0, 0}, fan_in, ATTN_INIT_UNIFORM};
    return s;
}

static attn_seed_spec spec2(const char *name, int64_t n0, int64_t n1, int64_t fan_in)
{
    attn_seed_spec s = {name, 2, {n0, n1}, fan_in, ATTN_INIT_UNIFORM};
    return s;
}

/* The one table of the rules' seeded parameters, which seeding, the
 * pipeline and the plan's cost all read. */
int attn_rule_seed_specs(attn_rule rule, const attn_dims *d, int64_t dh, int64_t dout,
                         attn_seed_spec *specs)
{
    int64_t dqk = d->Dq + d->Dk, dqv = d->Dq + d->Dv; /* dims are bounded by attn_count */
    int n = 0;
    switch (rule) {
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
    case ATTN_RULE_LINEAR:
        break;
    case ATTN_RULE_GENERAL:
        specs[n++] = spec2("attn.weight", d->Dq, d->Dk, d->Dk);
        specs[n++] = spec1("attn.bias", d->Dq, d->Dk);
        break;
    case ATTN_RULE_ADDITIVE:
        specs[n++] = spec2("query_proj.weight", dh, d->Dq, d->Dq);
        specs[n++] = spec2("key_proj.weight", dh, d->Dk, d->Dk);
        specs[n++] = spec1("key_proj.bias", dh, d->Dk);
        specs[n++] = spec2("v.weight", 1, dh, dh);
        break;
    case ATTN_RULE_CONCAT_TANH:
        specs[n++] = spec2("attn.weight", dh, dqk, dqk);
        specs[n++] = spec1("attn.bias", dh, dqk);
        break;
    case ATTN_RULE_CONCAT:
        specs[n++] = spec2("att_weight.weight", d->Lv, dqk, dqk);
        specs[n++] = spec1("att_weight.bias", d->Lv, dqk);
        specs[n++] = spec2("out.weight", dout, dqv, dqv);
        specs[n++] = spec1("out.bias", dout, dqv);
        break;
    default:
        return -1;
    }
    return n;
}

double attn_seed_floats(const attn_seed_spec *specs, size_t n)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double c = 1.0;
        for (int r = 0; r < specs[i].rank; r++)
            c *= (double)specs[i].shape[r];
        total += c;
    }
    return total;
}

attn_status attn_seed_params(const attn_request *req, uint64_t seed,
                             attn_param_set **out, attn_error *err)
{
    if (!req || !out)
        return attn_fail(err, ATTN_ERR_ARG, "", "attn_seed_params: NULL argument");
    attn_dims d;
    attn_status st = attn_check_qkv(&req->query, &req->key, &req->value, 1,
                                    req->opt.qkv_layout == ATTN_QKV_BSHD, &d, err);
    if (st != ATTN_OK)
        return st;
    if ((st = attn_check_sizes(req->hidden_size, req->output_size, err)) != ATTN_OK)
        return st;
    int64_t dh = req->hidden_size ? req->hidden_size : d.Dq;
    int64_t dout = req->output_size ? req->output_size : d.Dq;
    attn_seed_spec specs[ATTN_SEED_MAX];
    int n = attn_rule_seed_specs(req->rule, &d, dh, dout, specs);
    if (n < 0)
        return attn_fail(err, ATTN_ERR_ARG, "rule", "unknown rule %d", (int)req->rule);
    return attn_seed_build(specs, (size_t)n, seed, out, err);
}
