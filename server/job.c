/* job.c - the job runner both front ends share: plan, check the caps
 * against the plan's sizes and cost, seed what is missing, compute into
 * arena buffers. */
#include "srv.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void srv_job_init(srv_job *j, srv_job_kind kind, attn_rule rule)
{
    memset(j, 0, sizeof *j);
    j->kind = kind;
    if (kind == SRV_JOB_MULTIHEAD)
        j->u.mha = attn_mha_request_default();
    else
        j->u.att = attn_request_default(rule);
}

void srv_job_set_params(srv_job *j, const attn_named *items, size_t n)
{
    if (j->kind == SRV_JOB_MULTIHEAD) {
        j->u.mha.params = items;
        j->u.mha.n_params = n;
    } else {
        j->u.att.params = items;
        j->u.att.n_params = n;
    }
}

const attn_named *srv_job_params(const srv_job *j, size_t *n)
{
    *n = j->kind == SRV_JOB_MULTIHEAD ? j->u.mha.n_params : j->u.att.n_params;
    return j->kind == SRV_JOB_MULTIHEAD ? j->u.mha.params : j->u.att.params;
}

int srv_job_need_weights(const srv_job *j)
{
    return j->kind == SRV_JOB_MULTIHEAD ? j->u.mha.opt.need_weights : j->u.att.opt.need_weights;
}

/* ------------------------------------------------------------ caps */

/* A sparsity pattern's block layout, built for the kernels: cells bytes,
 * which a small block makes as many as Lq x Lk (a 120 KB body of 20000
 * rows with BigBird's block 1 took 400 MB). As many as the layout a
 * response may return (return_layout): ATTN_MAX_ELEMENTS. */
int srv_check_layout_cells(double cells, srv_err *e)
{
    if (cells <= (double)srv_cfg.max_elements)
        return 0;
    return srv_fail(e, 413, "too_large", "sparsity.block",
                    "the sparsity pattern's layout would have %.0f blocks; this server lays out at "
                    "most %lld (ATTN_MAX_ELEMENTS): use a larger sparsity.block",
                    cells, (long long)srv_cfg.max_elements);
}

/* BigBird's layout (the others': the request's own, or local_global's,
 * which the kernels do not build). */
static int check_layout(srv_job *j, srv_err *e)
{
    if (srv_job_options(j)->sparsity.pattern != ATTN_SPARSE_BIGBIRD)
        return 0;
    return srv_check_layout_cells((double)j->sh.layout_rows * (double)j->sh.layout_cols, e);
}

/* Working memory beside the inputs and results (projections, rotated
 * copies, sparsity layouts, the kernels' panels): 8 floats an element of
 * ATTN_MAX_ELEMENTS (2 GiB by default), and at least 256 MiB. */
int srv_check_scratch(size_t bytes, srv_err *e)
{
    double cap = fmax(32.0 * (double)srv_cfg.max_elements, 256.0 * 1048576.0);
    if ((double)bytes <= cap)
        return 0;
    return srv_fail(e, 413, "too_large", "",
                    "the computation would need %.0f MiB of working memory; this server allows "
                    "%.0f MiB a request (8 floats an element of ATTN_MAX_ELEMENTS): send fewer rows "
                    "or heads, a smaller hidden_size, or a larger sparsity block",
                    (double)bytes / 1048576.0, cap / 1048576.0);
}

int srv_check_result(const attn_shapes *sh, srv_err *e)
{
    if (sh->out_count > srv_cfg.max_elements)
        return srv_fail(e, 413, "too_large", "",
                        "the output would have %lld elements; this server builds at most %lld "
                        "(ATTN_MAX_ELEMENTS): send smaller inputs or split the batch",
                        (long long)sh->out_count, (long long)srv_cfg.max_elements);
    if (sh->w_count > srv_cfg.max_weights)
        return srv_fail(e, 413, "too_large", "need_weights",
                        "the weights would have %lld elements; this server returns at most %lld "
                        "(set need_weights to false)",
                        (long long)sh->w_count, (long long)srv_cfg.max_weights);
    return 0;
}

int srv_check_work(double flops, srv_err *e)
{
    if (flops <= srv_cfg.max_work)
        return 0;
    return srv_fail(e, 413, "too_large", "",
                    "the request would take about %.3g floating-point operations; this server "
                    "computes at most %.3g per request (ATTN_MAX_WORK): send shorter sequences, "
                    "fewer heads or a smaller batch, or split the request",
                    flops, srv_cfg.max_work);
}

/* Each (batch, head) slice costs the kernels a fixed part beside its
 * flops (its job's set-up, the queries' packing, the output's store):
 * 0.2 us a slice, 400000 one-row slices taking 77-94 ms (this host), what
 * some 5e4 floating-point operations take. So a request may have as many
 * slices as ATTN_MAX_WORK buys at that rate (4M by default, about a
 * second), and at least 1024. */
#define SLICE_FLOPS 5e4
#define MIN_SLICES 1024.0

static double job_slices(const srv_job *j)
{
    double n = j->kind == SRV_JOB_MULTIHEAD ? (double)j->u.mha.num_heads : 1.0;
    for (int i = 0; i + 2 < j->sh.out_rank; i++) /* the output's leading dimensions */
        n *= (double)j->sh.out_shape[i];
    return n;
}

int srv_check_slices(double n, const char *field, const char *whose, srv_err *e)
{
    double cap = fmax(MIN_SLICES, floor(srv_cfg.max_work / SLICE_FLOPS));
    if (n <= cap)
        return 0;
    return srv_fail(e, 413, "too_large", field,
                    "%s %.0f (batch, head) slices' worth; this server computes at most %.0f per "
                    "request (each costs about what %.0g floating-point operations do, beside "
                    "its own: ATTN_MAX_WORK / %.0g, at least %.0f): send fewer, longer sequences",
                    whose, n, cap, SLICE_FLOPS, SLICE_FLOPS, MIN_SLICES);
}

/* The field that sizes the parameters seeded for j. */
static const char *seed_field(const srv_job *j)
{
    attn_rule rule = j->u.att.rule;
    return j->kind == SRV_JOB_MULTIHEAD ? "query"
         : rule == ATTN_RULE_CONCAT ? "output_size"
         : rule == ATTN_RULE_ADDITIVE || rule == ATTN_RULE_CONCAT_TANH ? "hidden_size"
         : "query";
}

int srv_fail_plan(const srv_job *j, attn_status st, const attn_error *ae, srv_err *e)
{
    size_t n;
    srv_job_params(j, &n);
    if (st != ATTN_ERR_TOO_LARGE || n > 0 || strcmp(ae->field, "params") != 0)
        return srv_fail_lib(e, st, ae);
    /* parameters the request did not send: what sized them is at fault */
    const char *field = seed_field(j);
    return srv_fail(e, 413, "too_large", field,
                    "seeding the parameters would take more floats than can be counted (%s); use "
                    "a smaller %s, or send params", ae->message, field);
}

/* Seeded parameters are allocated and filled before the computation:
 * without this cap, "hidden_size": 1e8 in a 100-byte body asks for
 * gigabytes. floats is what the library's plan says seeding would make. */
int srv_check_seed_size(const srv_job *j, srv_err *e)
{
    size_t n;
    srv_job_params(j, &n);
    if (n > 0 || j->sh.param_floats <= (double)srv_cfg.max_elements)
        return 0;
    const char *field = seed_field(j);
    return srv_fail(e, 413, "too_large", field,
                    "seeding the parameters would take about %.0f floats; this server builds at most "
                    "%lld (use a smaller %s, smaller inputs, or send params)",
                    j->sh.param_floats, (long long)srv_cfg.max_elements, field);
}

/* ------------------------------------------------------------ running */

static int job_plan(srv_job *j, srv_err *e)
{
    attn_error ae = {{0}, {0}};
    if (srv_job_finish_options(j, e))
        return -1;
    attn_status st = j->kind == SRV_JOB_MULTIHEAD ? attn_mha_plan(&j->u.mha, &j->sh, &ae)
                                                  : attn_plan(&j->u.att, &j->sh, &ae);
    return st == ATTN_OK ? 0 : srv_fail_plan(j, st, &ae, e);
}

/* Parameters from the seed when the request sent none (a cache reference
 * kept in call->seeded). */
int srv_job_seed(srv_call *call, srv_job *j, srv_err *e)
{
    size_t n;
    srv_job_params(j, &n);
    if (n > 0)
        return 0;
    attn_error ae = {{0}, {0}};
    attn_status st = srv_seed_job(j, &call->seeded, &ae);
    if (st != ATTN_OK)
        return srv_fail_lib(e, st, &ae);
    const attn_param_set *set = srv_seeded_set(call->seeded);
    srv_job_set_params(j, set->items, set->n);
    return 0;
}

/* A multi-head job computes with its seeded set's prepared weights when
 * there are some (the same bits as with the set, whose items stay the
 * job's params for return_params). */
static int job_compute(const srv_call *call, srv_job *j, srv_err *e)
{
    attn_error ae = {{0}, {0}};
    attn_status st;
    attn_ctx *ctx = srv_ctx_acquire(j->sh.flops);
    if (j->kind == SRV_JOB_MULTIHEAD) {
        attn_mha_request mha = j->u.mha;
        if ((mha.weights = srv_seeded_weights(call->seeded))) {
            mha.params = NULL;
            mha.n_params = 0;
        }
        st = attn_mha_compute_lse(ctx, &mha, j->out, j->weights, j->lse, &ae);
    } else {
        st = attn_compute_lse(ctx, &j->u.att, j->out, j->weights, j->lse, &ae);
    }
    srv_ctx_release(ctx, j->sh.scratch_bytes);
    return st == ATTN_OK ? 0 : srv_fail_lib(e, st, &ae);
}

/* The block layout the sparsity pattern used, when asked (return_layout). */
static int layout(srv_call *call, srv_job *j, srv_err *e)
{
    if (!j->return_layout)
        return 0;
    const attn_options *o = j->kind == SRV_JOB_MULTIHEAD ? &j->u.mha.opt : &j->u.att.opt;
    int64_t n;
    if (j->sh.layout_rows < 1 || j->sh.layout_cols < 1)
        return srv_fail(e, 422, "invalid_param", "return_layout",
                        "return_layout needs a sparsity pattern (there is no block layout without one)");
    if (!attn_size_mul(j->sh.layout_rows, j->sh.layout_cols, &n) || n > srv_cfg.max_elements)
        return srv_fail(e, 413, "too_large", "return_layout",
                        "the layout would have %lld x %lld blocks; this server returns at most %lld",
                        (long long)j->sh.layout_rows, (long long)j->sh.layout_cols,
                        (long long)srv_cfg.max_elements);
    j->layout = srv_arena_alloc(&call->arena, (size_t)n);
    if (!j->layout)
        return srv_fail(e, 413, "too_large", "return_layout", "not enough memory for the layout");
    const attn_tensor *q = j->kind == SRV_JOB_MULTIHEAD ? &j->u.mha.query : &j->u.att.query;
    const attn_tensor *k = j->kind == SRV_JOB_MULTIHEAD ? (j->u.mha.key.rank ? &j->u.mha.key : q)
                                                        : &j->u.att.key;
    attn_error ae = {{0}, {0}};
    attn_status st = attn_sparsity_layout(o, q->shape[q->rank - 2], k->shape[k->rank - 2], j->layout, &ae);
    return st == ATTN_OK ? 0 : srv_fail_lib(e, st, &ae);
}

/* 0, or -1 with e filled when one of out's n floats is not finite: finite
 * inputs can overflow float32 on the way (a score q.k beyond 3.4e38 makes
 * its row NaN; a sum of weighted values beyond it is inf, the kernels
 * dividing by the softmax's sum last, as FlashAttention does), and JSON
 * has no such number. The whole output is read here, on the thread that
 * encodes it next. */
int srv_check_finite(const float *out, int64_t n, int64_t row_len, srv_err *e)
{
    int64_t i = srv_first_nonfinite(out, n);
    if (i < 0)
        return 0;
    return srv_fail(e, 422, "overflow", "",
                    "output row %lld is not finite: the computation overflowed float32 (a "
                    "score q.k or a sum of weighted values beyond 3.4e38); scale the inputs down",
                    (long long)(row_len > 0 ? i / row_len : i));
}

/* The log-sum-exp's shape, one per query row (and head): the output's
 * without its last dimension, heads inserted before the rows for
 * multi-head. */
static void lse_shape(srv_job *j)
{
    const attn_shapes *sh = &j->sh;
    /* the rules': the weights' shape but the keys, (B, H, Lq) whatever
     * the output's layout (qkv_layout); multi-head's: its output's but
     * the features, with the heads before Lq (its weights may be averaged) */
    int mha = j->kind == SRV_JOB_MULTIHEAD;
    const int64_t *s = mha ? sh->out_shape : sh->w_shape;
    int n = (mha ? sh->out_rank : sh->w_rank) - 1;
    j->lse_rank = 0;
    for (int i = 0; i < n; i++) {
        if (mha && i == n - 1)
            j->lse_shape[j->lse_rank++] = j->u.mha.num_heads;
        j->lse_shape[j->lse_rank++] = s[i];
    }
}

/* A job whose result or work is this large counts against
 * ATTN_MAX_INFLIGHT whatever its body's size: 60 KB of nested arrays (a
 * 5000-row dot product with its weights) asks for 100 MB of weights and
 * 375 MB of JSON. */
#define BIG_RESULT_FLOATS ((int64_t)4 << 20)
#define BIG_WORK 2e9

static int big_job(const srv_job *j)
{
    return j->sh.out_count + j->sh.w_count > BIG_RESULT_FLOATS || j->sh.flops > BIG_WORK;
}

int srv_job_take_result(srv_call *call, srv_job *j, srv_err *e)
{
    call->t_parse = srv_now_ms() - call->t0;
    /* held through the answer's encoding, the largest part of its memory */
    if (!srv_counted && !call->counted && big_job(j)) {
        if (srv_compute_enter() != 0)
            return srv_fail(e, 503, "overloaded", "",
                            "the server is busy with %d large requests (ATTN_MAX_INFLIGHT); retry shortly",
                            srv_cfg.max_inflight);
        call->counted = 1;
    }
    int64_t nl = 1;
    for (int i = 0; i < j->lse_rank; i++)
        nl *= j->lse_shape[i]; /* at most H times the output's rows: planned already */
    size_t ob = (size_t)j->sh.out_count * sizeof(float), wb = (size_t)j->sh.w_count * sizeof(float);
    j->out = srv_arena_alloc(&call->arena, ob);
    j->weights = j->sh.w_count ? srv_arena_alloc(&call->arena, wb) : NULL;
    j->lse = j->return_lse ? srv_arena_alloc(&call->arena, (size_t)nl * sizeof(float)) : NULL;
    if (!j->out || (j->sh.w_count && !j->weights) || (j->return_lse && !j->lse))
        return srv_fail(e, 413, "too_large", "", "not enough memory for the result");
    return 0;
}

int srv_job_run(srv_call *call, srv_job *j, srv_err *e)
{
    if (j->cu_q || j->cu_k)
        return srv_varlen_run(call, j, e);
    /* Planned before seeding: the plan of a job without parameters says
     * what seeding would make, so every cap is checked before any of the
     * job's memory is taken. */
    if (job_plan(j, e) || check_layout(j, e) ||
        srv_check_result(&j->sh, e) || srv_check_seed_size(j, e) || srv_check_work(j->sh.flops, e) ||
        srv_check_slices(job_slices(j), "query", "the request's batch and heads are", e) ||
        srv_check_scratch(j->sh.scratch_bytes, e) || srv_job_seed(call, j, e))
        return -1;
    lse_shape(j);
    if (srv_job_take_result(call, j, e))
        return -1;
    double t0 = srv_now_ms();
    int rc = job_compute(call, j, e) ||
             srv_check_finite(j->out, j->sh.out_count, j->sh.out_shape[j->sh.out_rank - 1], e) ||
             layout(call, j, e);
    call->t_compute = srv_now_ms() - t0;
    return rc;
}

/* ------------------------------------------------------------ the call */

void srv_call_free(srv_call *call)
{
    json_decref(call->root);
    call->root = NULL;
    srv_seeded_release(call->seeded);
    call->seeded = NULL;
    srv_arena_free(&call->arena);
    if (call->counted)
        srv_compute_leave();
    call->counted = 0;
}

/* The last small envelope this thread parsed and its tree, shared (a
 * reference each) with the next call of the same text that only reads it:
 * a client repeating one request's shape sends the same envelope (the big
 * arrays lifted out, the placeholders numbering the blobs alike), and
 * Jansson's parse of even 70 bytes (objects, hash tables, a malloc a key)
 * costs a tenth of a small request. The same text gives the same tree, so
 * the same fields and the same errors. Freed with the thread. */
#define SHARE_MAX 512 /* bytes of envelope worth keeping */
/* JSON values Jansson may be given: some 5 MB of its memory at most. */
#define ENVELOPE_MAX_VALUES 65536

typedef struct {
    json_t *root;
    size_t len;
    char text[SHARE_MAX];
} envelope_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ok;

static void cache_free(void *p)
{
    envelope_cache *c = p;
    json_decref(c->root);
    free(c);
}

static void cache_init(void)
{
    cache_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* This thread's cache, made on first use; NULL when there is none. */
static envelope_cache *thread_cache(void)
{
    pthread_once(&cache_once, cache_init);
    if (!cache_ok)
        return NULL;
    envelope_cache *c = pthread_getspecific(cache_key);
    if (!c && (c = calloc(1, sizeof *c)) && pthread_setspecific(cache_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

static json_t *parse_envelope(const srv_call *call, json_error_t *jerr)
{
    const char *t = call->scan.envelope;
    size_t n = call->scan.envelope_len;
    envelope_cache *c = call->share_root && n <= SHARE_MAX ? thread_cache() : NULL;
    if (c && c->root && c->len == n && memcmp(c->text, t, n) == 0)
        return json_incref(c->root);
    json_t *root = json_loadb(t, n, JSON_REJECT_DUPLICATES, jerr);
    if (c && root && json_is_object(root)) {
        json_decref(c->root);
        c->root = json_incref(root);
        c->len = n;
        memcpy(c->text, t, n);
    }
    return root;
}

/* Text -> envelope (big arrays lifted out) -> Jansson, duplicates refused.
 * what names the text in errors ("the body"). */
int srv_call_parse(srv_call *call, const char *text, size_t len, const char *what, srv_err *e)
{
    /* An array (or anything but an object) would reach Jansson whole, value
     * by value: refused from its first byte, before the scanner reads it. */
    if (srv_json_not_object(text, len))
        return srv_fail(e, 400, "invalid_json", "", "%s must be a JSON object", what);
    if (srv_scan(text, len, &call->arena, &call->scan))
        return srv_fail(e, 503, "overloaded", "", "out of memory reading the request");
    /* Before Jansson, which recurses once per level; the scanner counted
     * the depth in the same pass. */
    if (call->scan.depth > srv_cfg.max_depth)
        return srv_fail(e, 400, "invalid_json", "",
                        "%s nests arrays or objects more than %d deep (ATTN_MAX_DEPTH)", what,
                        srv_cfg.max_depth);
    if (call->scan.reserved)
        return srv_fail(e, 400, "invalid_json", "",
                        "%s holds the character U+0001 in a string, which this service reserves",
                        what);
    /* What the scanner lifted is read as arrays of floats; the rest goes
     * to Jansson value by value. A tensor that is ragged, unclosed or not
     * made of numbers would reach it whole. */
    if (call->scan.values > ENVELOPE_MAX_VALUES)
        return srv_fail(e, 413, "too_large", "",
                        "%s holds over %d JSON values outside its arrays of numbers (a tensor "
                        "that is ragged, unclosed or holds other values is counted value by "
                        "value; one that is a well-formed array of numbers is not)",
                        what, ENVELOPE_MAX_VALUES);
    json_error_t jerr;
    call->root = parse_envelope(call, &jerr);
    if (!call->root)
        return srv_fail(e, 400, "invalid_json", "", "%s is not valid JSON: %s", what, jerr.text);
    if (!json_is_object(call->root))
        return srv_fail(e, 400, "invalid_json", "", "%s must be a JSON object", what);
    return 0;
}
