/* cost.c - what a job will cost, estimated before it runs: the floats its
 * seeded parameters take and its floating-point operations. */
#include "srv.h"

static double last_dim(const attn_tensor *t)
{
    return t->rank ? (double)t->shape[t->rank - 1] : 0.0;
}

static double rows(const attn_tensor *t)
{
    return t->rank >= 2 ? (double)t->shape[t->rank - 2] : 0.0;
}

static int check_seed_size(double floats, const char *field, srv_err *e)
{
    if (floats <= (double)srv_cfg.max_elements)
        return 0;
    return srv_fail(e, 413, "too_large", field,
                    "seeding the parameters would take about %.0f floats; this server builds at most "
                    "%lld (use a smaller %s, smaller inputs, or send params)",
                    floats, (long long)srv_cfg.max_elements, field);
}

/* Seeded parameters are allocated and filled before any shape is planned:
 * without this cap, "hidden_size": 1e8 in a 100-byte body asks for
 * gigabytes. The bound is an upper estimate of every rule's parameter
 * count, in doubles so nothing overflows. */
int srv_cost_check_seed(const srv_job *j, srv_err *e)
{
    size_t n;
    srv_job_params(j, &n);
    if (n > 0)
        return 0;
    if (j->kind == SRV_JOB_MULTIHEAD) {
        const attn_mha_request *r = &j->u.mha;
        double em = last_dim(&r->query);
        double kd = r->key.rank ? last_dim(&r->key) : em, vd = r->value.rank ? last_dim(&r->value) : em;
        return check_seed_size(em * (2.0 * em + kd + vd + 8.0), "query", e);
    }
    const attn_request *r = &j->u.att;
    double dq = last_dim(&r->query), dk = last_dim(&r->key), dv = last_dim(&r->value);
    double dh = r->hidden_size > 0 ? (double)r->hidden_size : dq;
    double dout = r->output_size > 0 ? (double)r->output_size : dq;
    double h = dh > dq ? dh : dq;
    return check_seed_size(h * (dq + dk + 2.0), "hidden_size", e) ||
           check_seed_size((rows(&r->value) + 1.0) * (dq + dk + 1.0) + dout * (dq + dv + 1.0),
                           "output_size", e);
}

/* After a successful plan: every shape is known to be consistent. */
double srv_cost_flops(const srv_job *j)
{
    if (j->kind == SRV_JOB_MULTIHEAD) {
        const attn_mha_request *r = &j->u.mha;
        const attn_tensor *k = r->key.rank ? &r->key : &r->query;
        double batch = r->query.rank == 3 ? (double)r->query.shape[0] : 1.0;
        double lq = rows(&r->query), lk = rows(k), emb = last_dim(&r->query);
        return 2.0 * batch * (4.0 * lq * lk * emb / 2.0 + 4.0 * (lq + lk) * emb * emb);
    }
    const attn_request *r = &j->u.att;
    double batch = r->query.rank == 3 ? (double)r->query.shape[0] : 1.0;
    double pairs = batch * rows(&r->query) * rows(&r->key);
    double flops = 2.0 * pairs * (last_dim(&r->query) + last_dim(&r->value));
    if (r->rule == ATTN_RULE_ADDITIVE || r->rule == ATTN_RULE_CONCAT_TANH)
        /* a tanh and a multiply-add per (query, key, hidden unit) */
        flops += 3.0 * pairs * (r->hidden_size > 0 ? (double)r->hidden_size : last_dim(&r->query));
    return flops;
}
