/* test_ctx.c - the library's execution contract: the cost attn_plan and
 * attn_mha_plan report (parameter floats, FLOPs, workspace), that planning
 * allocates nothing, that a context makes no heap allocation after its
 * first call of a shape, and that contexts used by concurrent threads give
 * the same results as one thread.
 *
 * Heap allocations are counted by interposing malloc, calloc, realloc,
 * posix_memalign, aligned_alloc and memalign in this binary (glibc's
 * __libc_* entry points do the work), so the counts include every
 * allocation the library makes, wherever it makes it.
 *
 * Usage: test_ctx [--verbose]. Prints "N passed, N failed"; exits 1 when
 * anything failed.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "attn.h"
#include "internal.h" /* the context's regions, for the workspace check */
#include "pool.h"
#include "ref.h"
#include "ref_modern.h"

/* ------------------------------------------------ allocation counting */

/* Under AddressSanitizer (make asan) malloc belongs to the sanitizer: the
 * counts are not taken and the allocation checks are skipped. */
#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNTING 0
#endif
#endif
#ifndef COUNTING
#define COUNTING 1
#endif

static _Atomic long n_allocs;

#if COUNTING
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t each)
{
    atomic_fetch_add(&n_allocs, 1);
    return __libc_calloc(n, each);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    atomic_fetch_add(&n_allocs, 1);
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
#endif

static long allocs(void)
{
    return atomic_load(&n_allocs);
}

/* ------------------------------------------------------------ checks */

static int n_passed, n_failed, n_skipped;
static int verbose;

static void check(int ok, const char *what, const char *fmt, ...)
{
    if (ok) {
        n_passed++;
        if (verbose)
            printf("ok   %s\n", what);
        return;
    }
    n_failed++;
    printf("FAIL %s: ", what);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* Relative closeness of two estimates computed in double. */
static int near(double got, double want)
{
    return fabs(got - want) <= 1e-9 * fabs(want) + 1e-9;
}

static float data[1 << 16];

/* A tensor of the given shape over the shared data (its values do not
 * matter to a plan). */
static attn_tensor T(int rank, int64_t a, int64_t b, int64_t c)
{
    attn_tensor t = {.rank = rank, .shape = {a, b, c, 0}, .data = data};
    return t;
}

static double set_floats(const attn_param_set *s)
{
    double total = 0.0;
    for (size_t i = 0; i < s->n; i++) {
        double c = 1.0;
        for (int r = 0; r < s->items[i].t.rank; r++)
            c *= (double)s->items[i].t.shape[r];
        total += c;
    }
    return total;
}

/* ------------------------------------------------------------- cost */

/* Plans r (or m when r is NULL) and checks that it succeeds without a
 * heap allocation. */
static attn_status plan_counted(const attn_request *r, const attn_mha_request *m,
                                attn_shapes *sh, const char *what)
{
    attn_error e = {{0}, {0}};
    long a0 = allocs();
    attn_status st = r ? attn_plan(r, sh, &e) : attn_mha_plan(m, sh, &e);
    long n = allocs() - a0;
    check(st == ATTN_OK && n == 0, what, "plan: status %d, %ld allocations (%s)", st, n,
          e.message);
    return st;
}

static double round64(double bytes)
{
    return ceil(bytes / 64.0) * 64.0;
}

/* A request planned with its seeded parameters given (the set `set`)
 * costs what it cost planned without them, but for the workspace, which
 * no longer holds the seeded set (its items and its floats, each rounded
 * up to 64 bytes). */
static void check_same_cost(attn_status st, const attn_shapes *got, const attn_shapes *want,
                            const attn_param_set *set, const char *what)
{
    double seeded = round64((double)(set->n * sizeof(attn_named))) +
                    round64(4.0 * set_floats(set));
    check(st == ATTN_OK && near(got->param_floats, want->param_floats) &&
              near(got->flops, want->flops) &&
              near(got->scratch_bytes + seeded, want->scratch_bytes),
          what, "status %d; %.17g %.17g %.17g (+%.17g) vs %.17g %.17g %.17g", st,
          got->param_floats, got->flops, got->scratch_bytes, seeded, want->param_floats,
          want->flops, want->scratch_bytes);
}

/* The score pipeline's cost per scored pair beside its arithmetic
 * (attn.h, attn_shapes.flops), with the weights returned: 16 for the
 * softmax, 32 for the weight stored. */
#define PIPE_PAIR (16.0 + 32.0)

/* What a pair of a decode-sized query adds on the kernels' path: fewer
 * than 16 query rows go a row at a time, 400 and 8 a column of d + dv. */
static double decode_pair(double Lq, double width)
{
    return Lq < 16 ? 400.0 + 8.0 * width : 0.0;
}

/* The cost of one rule written out from the formulas (2 per multiply-add,
 * 3 per tanh score term: projections, scores, weighted sum) and attn.h's
 * charges beside them: per pair PIPE_PAIR, a decode-sized query's, a tanh
 * rule's 50 + 28 per hidden unit, concat's 300 (the row path); linear
 * attention's 500 a row. */
static double want_flops(attn_rule rule, double B, double Lq, double Lk, double Dq, double Dk,
                         double Dv, double Lv, double dh, double dout)
{
    switch (rule) {
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
        return 2 * B * Lq * Lk * Dk + 2 * B * Lq * Lk * Dv +
               B * Lq * Lk * (PIPE_PAIR + decode_pair(Lq, Dk + Dv));
    case ATTN_RULE_GENERAL:
        return 2 * B * Lk * Dk * Dq + 2 * B * Lq * Lk * Dq + 2 * B * Lq * Lk * Dv +
               B * Lq * Lk * (PIPE_PAIR + decode_pair(Lq, Dq + Dv));
    case ATTN_RULE_ADDITIVE:
    case ATTN_RULE_CONCAT_TANH:
        return 2 * B * Lq * Dq * dh + 2 * B * Lk * Dk * dh + 3 * B * Lq * Lk * dh +
               2 * B * Lq * Lk * Dv + B * Lq * Lk * (PIPE_PAIR + 50 + 28 * dh);
    case ATTN_RULE_LINEAR: /* phi(K)^T [V 1] and phi(Q) times it; the implied weights */
        return 2 * B * (Lq + Lk) * Dk * (Dv + 1) + 2 * B * Lq * Lk * Dk + 500 * B * (Lq + Lk);
    default: /* concat: scores from [q; k], attention over Lv, out([q; c]) */
        return 2 * B * Lq * Lv * (Dq + Dk) + 2 * B * Lq * Lv * Dv + 2 * B * Lq * dout * (Dq + Dv) +
               B * Lq * Lv * (PIPE_PAIR + 300);
    }
}

static void test_rule_cost(attn_rule rule)
{
    char what[96];
    int64_t B = 2, Lq = 3, Lk = 3, Dq = 4, Dk = rule <= ATTN_RULE_GENERAL ? 4 : 5, Dv = 6;
    int64_t Lv = rule == ATTN_RULE_CONCAT ? 7 : Lk, dh = 9, dout = 11;
    if (rule == ATTN_RULE_GENERAL)
        Dk = 5;
    if (rule == ATTN_RULE_DOT || rule == ATTN_RULE_SCALED_DOT || rule == ATTN_RULE_LINEAR)
        Dk = Dq;
    attn_request r = attn_request_default(rule);
    r.query = T(3, B, Lq, Dq);
    r.key = T(3, B, Lk, Dk);
    r.value = T(3, B, Lv, Dv);
    r.hidden_size = dh;
    r.output_size = dout;
    attn_shapes sh, sh2;
    attn_error e;
    snprintf(what, sizeof what, "%s: plan without params", attn_rule_name(rule));
    attn_status st = plan_counted(&r, NULL, &sh, what);
    if (st != ATTN_OK)
        return;
    attn_param_set *set = NULL;
    st = attn_seed_params(&r, 3, &set, &e);
    snprintf(what, sizeof what, "%s: param_floats = the seeded set's", attn_rule_name(rule));
    check(st == ATTN_OK && near(sh.param_floats, set_floats(set)), what, "%.17g vs %.17g",
          sh.param_floats, set ? set_floats(set) : -1.0);
    double f = want_flops(rule, B, Lq, Lk, Dq, Dk, Dv, Lv, dh, dout);
    snprintf(what, sizeof what, "%s: flops", attn_rule_name(rule));
    check(near(sh.flops, f), what, "%.17g, want %.17g", sh.flops, f);
    snprintf(what, sizeof what, "%s: scratch_bytes", attn_rule_name(rule));
    check(sh.scratch_bytes > 0 && fmod(sh.scratch_bytes, 64.0) == 0.0, what, "%.17g",
          sh.scratch_bytes);
    /* The same request with the seeded parameters given: the same cost. */
    r.params = set->items;
    r.n_params = set->n;
    st = attn_plan(&r, &sh2, &e);
    snprintf(what, sizeof what, "%s: cost with params given", attn_rule_name(rule));
    check_same_cost(st, &sh2, &sh, set, what);
    attn_param_set_free(set);
}

static void test_mha_cost(int64_t kdim, int64_t vdim, int64_t H, int64_t Hkv, int norm)
{
    char what[128];
    int64_t B = 2, Lq = 3, Lk = 5, E = 8;
    attn_mha_request m = attn_mha_request_default();
    m.query = T(3, B, Lq, E);
    if (kdim) {
        m.key = T(3, B, Lk, kdim);
        m.value = T(3, B, Lk, vdim);
    } else {
        Lk = Lq;
    }
    m.num_heads = H;
    m.num_kv_heads = Hkv;
    m.residual_norm = norm;
    attn_shapes sh, sh2;
    attn_error e;
    snprintf(what, sizeof what, "multihead kdim %lld H %lld Hkv %lld norm %d",
             (long long)kdim, (long long)H, (long long)Hkv, norm);
    attn_status st = plan_counted(NULL, &m, &sh, what);
    if (st != ATTN_OK)
        return;
    attn_param_set *set = NULL;
    st = attn_mha_seed_params(&m, 5, &set, &e);
    check(st == ATTN_OK && near(sh.param_floats, set_floats(set)), what,
          "param_floats %.17g, the seeded set has %.17g", sh.param_floats,
          set ? set_floats(set) : -1.0);
    double kd = kdim ? (double)kdim : (double)E, vd = kdim ? (double)vdim : (double)E;
    double ekv = (double)(E / H * (Hkv ? Hkv : H));
    double f = 2.0 * B * (2.0 * Lq * E * E + Lk * ekv * (kd + vd)) + 4.0 * B * Lq * Lk * E +
               B * H * Lq * Lk * (PIPE_PAIR + decode_pair(Lq, 2.0 * (double)(E / H)));
    check(near(sh.flops, f), what, "flops %.17g, want %.17g", sh.flops, f);
    m.params = set->items;
    m.n_params = set->n;
    st = attn_mha_plan(&m, &sh2, &e);
    strcat(what, ", params given");
    check_same_cost(st, &sh2, &sh, set, what);
    attn_param_set_free(set);
}

/* The pipeline's charges beside the arithmetic (attn.h, attn_shapes.flops)
 * one option at a time, on scaled_dot over Lq = 6 queries, Lk = 8 keys of
 * dim 1, without weights: flops = the 4 per pair of the products plus, per
 * pair, 16, what the option adds (the extra column) and, but on the row
 * path (hard attention), a decode-sized query's (decode_pair);
 * local_global's pattern counts fewer pairs. */
static void test_pipeline_cost(void)
{
    enum { LQ = 6, LK = 8 };
    static uint8_t mask[LQ * LK];
    static int64_t global[] = {1};
    static const float bias[LQ * LK];
    double pairs = LQ * LK, decode = decode_pair(LQ, 2);
    struct { const char *what; attn_options o; double extra, counted; int rows; } c[] = {
        {"softmax alone", {.causal = 0}, 0, pairs, 0},
        {"weights", {.need_weights = 1}, 32 * pairs, pairs, 0},
        {"bias", {.bias = {2, {LQ, LK}, (float *)bias}}, 32 * pairs, pairs, 0},
        {"mask", {.mask = {2, {LQ, LK}, mask}}, 50 * pairs, pairs, 0},
        {"argmax", {.hard = ATTN_HARD_ARGMAX}, 300 * pairs, pairs, 1},
        {"argmax, mask (row by row)", {.hard = ATTN_HARD_ARGMAX, .mask = {2, {LQ, LK}, mask}},
         (300 + 200) * pairs, pairs, 1},
        {"top_k", {.hard = ATTN_HARD_TOPK, .top_k = 3}, 1800 * pairs, pairs, 1},
        {"sample", {.hard = ATTN_HARD_SAMPLE, .temperature = 1}, 1800 * pairs, pairs, 1},
        {"softcap (flash kernel)", {.softcap = 2}, 0, pairs, 0},
        {"argmax, softcap (row by row)", {.hard = ATTN_HARD_ARGMAX, .softcap = 2}, (300 + 1400) * pairs,
         pairs, 1},
        /* window 0 and global 1: pairs counted Lq (2 w + 1) + 1 (Lq + Lk) = 20
         * (the overlap twice), not 48, and the global row's and key's 14 at
         * 450 more */
        {"local_global", {.sparsity = {.pattern = ATTN_SPARSE_LOCAL_GLOBAL, .window = 0,
                                       .global = global, .n_global = 1}},
         450 * 14, 20, 0},
        /* 2 x 2 blocks: 3 x 4 cells at 200; every block allowed (global 2) */
        {"bigbird", {.sparsity = {.pattern = ATTN_SPARSE_BIGBIRD, .block = 2,
                                  .window_blocks = 3, .global_blocks = 2}},
         200 * 12, pairs, 0},
    };
    memset(mask, 1, sizeof mask);
    for (size_t t = 0; t < sizeof c / sizeof *c; t++) {
        attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
        r.query = T(2, LQ, 1, 0);
        r.key = T(2, LK, 1, 0);
        r.value = T(2, LK, 1, 0);
        r.opt = c[t].o;
        attn_shapes sh;
        char what[64];
        snprintf(what, sizeof what, "pipeline cost: %s", c[t].what);
        if (plan_counted(&r, NULL, &sh, what) != ATTN_OK)
            continue;
        double want = (4.0 + 16.0 + (c[t].rows ? 0 : decode)) * c[t].counted + c[t].extra;
        check(near(sh.flops, want), what, "flops %.17g, want %.17g", sh.flops, want);
    }
    /* 16 query rows go through the flash kernel's blocks: no decode charge */
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.query = T(2, 16, 1, 0);
    r.key = T(2, LK, 1, 0);
    r.value = T(2, LK, 1, 0);
    r.opt.need_weights = 0;
    attn_shapes sh;
    if (plan_counted(&r, NULL, &sh, "pipeline cost: 16 query rows") == ATTN_OK)
        check(near(sh.flops, 20.0 * 16 * LK), "pipeline cost: 16 query rows", "flops %.17g, want %.17g",
              sh.flops, 20.0 * 16 * LK);
}

/* A 100-byte request can name enormous sizes: planning it must report the
 * cost without allocating in proportion (tests/fuzz found the seeding
 * version of this). */
static void test_hostile_cost(void)
{
    attn_request r = attn_request_default(ATTN_RULE_ADDITIVE);
    r.query = T(2, 2, 3, 0);
    r.key = T(2, 4, 5, 0);
    r.value = T(2, 4, 6, 0);
    r.hidden_size = 100000000;
    attn_shapes sh;
    attn_error e;
    long a0 = allocs();
    attn_status st = attn_plan(&r, &sh, &e);
    long n = allocs() - a0;
    double want = 1e8 * 3 + 1e8 * 5 + 1e8 + 1e8; /* query_proj, key_proj, its bias, v */
    check(st == ATTN_OK && n == 0 && near(sh.param_floats, want), "hidden_size 1e8: plan",
          "status %d, %ld allocations, param_floats %.17g want %.17g", st, n, sh.param_floats,
          want);
    check(sh.scratch_bytes >= 4.0 * 1e8 * (2 + 4), "hidden_size 1e8: scratch",
          "%.17g bytes for the projections", sh.scratch_bytes);

    r = attn_request_default(ATTN_RULE_CONCAT);
    r.query = T(2, 2, 3, 0);
    r.key = T(2, 2, 5, 0);
    r.value = T(2, 4, 6, 0);
    r.output_size = 1000000000000;
    a0 = allocs();
    st = attn_plan(&r, &sh, &e);
    n = allocs() - a0;
    want = 4.0 * 8 + 4 + 1e12 * 9 + 1e12; /* att_weight.*, out.weight, out.bias */
    check(st == ATTN_OK && n == 0 && near(sh.param_floats, want) && isfinite(sh.flops),
          "output_size 1e12: plan", "status %d, %ld allocations, param_floats %.17g want %.17g",
          st, n, sh.param_floats, want);
}

/* ---------------------------------------------------- one request */

/* A request of either kind, with its buffers. */
typedef struct {
    const char *name;
    attn_request r;      /* when mha is 0 */
    attn_mha_request m;  /* when mha is 1 */
    int mha;
    attn_shapes sh;
    float *out, *w;
    int modern; /* scaled_dot with the score pipeline's options */
    int bf16;   /* precision bf16: checked within 2^-5 (bfloat16's rounding) */
} job;

static attn_status job_plan(job *j)
{
    attn_error e;
    attn_status st = j->mha ? attn_mha_plan(&j->m, &j->sh, &e) : attn_plan(&j->r, &j->sh, &e);
    if (st != ATTN_OK) {
        check(0, j->name, "plan: %s", e.message);
        return st;
    }
    j->out = malloc(sizeof(float) * (size_t)j->sh.out_count);
    j->w = j->sh.w_count ? malloc(sizeof(float) * (size_t)j->sh.w_count) : NULL;
    return ATTN_OK;
}

static attn_status job_run(job *j, attn_ctx *ctx, float *out, float *w)
{
    attn_error e;
    attn_status st = j->mha ? attn_mha_compute(ctx, &j->m, out, w, &e)
                            : attn_compute(ctx, &j->r, out, w, &e);
    if (st != ATTN_OK)
        printf("     %s: %s\n", j->name, e.message);
    return st;
}

static void job_free(job *j)
{
    free(j->out);
    free(j->w);
}

/* Elementwise |got - want| <= 1e-5 + 1e-4 |want| (test_lib's tolerance),
 * or with loose set 2^-5 (1 + |want|): bfloat16 products. */
static int close_to(const float *got, const double *want, int64_t n, int loose, int64_t *bad)
{
    double a = loose ? 1.0 / 32 : 1e-5, r = loose ? 1.0 / 32 : 1e-4;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= a + r * fabs(want[i]))) {
            *bad = i;
            return 0;
        }
    return 1;
}

/* The score pipeline's options of a dot-product request into m. */
static void modern_options(const attn_options *o, rm_request *m, double *slope, double *sink)
{
    m->align = o->align == ATTN_ALIGN_BOTTOM_RIGHT ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    m->has_window = o->has_window;
    m->left = o->window_left;
    m->right = o->window_right;
    m->softcap = o->softcap;
    if (o->alibi) {
        if (o->alibi_slopes)
            *slope = o->alibi_slopes[0];
        else
            rm_alibi_slopes(1, slope);
        m->alibi = slope;
    }
    if (o->sinks) {
        *sink = o->sinks[0];
        m->sinks = sink;
    }
    m->rope.on = o->rope.on;
    m->rope.base = o->rope.base;
    m->rope.style = o->rope.style == ATTN_ROPE_INTERLEAVED ? RM_ROPE_INTERLEAVED : RM_ROPE_HALF;
    m->rope.dims = o->rope.dims;
    m->rope.offset = o->rope.offset;
}

/* Linear attention (no parameters, unmasked here) and scaled_dot with the
 * score pipeline's options against tests/ref_modern.c. */
static int ref_modern(const attn_request *r, double *ro, double *rw)
{
    const attn_tensor *t[3] = {&r->query, &r->key, &r->value};
    double *d[3];
    int o = r->query.rank == 3;
    for (int i = 0; i < 3; i++) {
        int64_t n = t[i]->shape[0] * t[i]->shape[1] * (o ? t[i]->shape[2] : 1);
        d[i] = malloc(sizeof(double) * (size_t)n);
        for (int64_t e = 0; e < n; e++)
            d[i][e] = t[i]->data[e];
    }
    rm_request m;
    memset(&m, 0, sizeof m);
    double slope, sink;
    m.rule = r->rule == ATTN_RULE_LINEAR ? RM_LINEAR : RM_SCALED_DOT;
    modern_options(&r->opt, &m, &slope, &sink);
    m.B = o ? r->query.shape[0] : 1;
    m.Lq = r->query.shape[o];
    m.Lk = r->key.shape[o];
    m.Dq = m.Dk = r->query.shape[o + 1];
    m.Dv = r->value.shape[o + 1];
    m.query = d[0]; m.key = d[1]; m.value = d[2];
    m.causal = r->opt.causal;
    int rc = rm_compute(&m, ro, rw, NULL, NULL);
    for (int i = 0; i < 3; i++)
        free(d[i]);
    return rc;
}

/* A sparsity pattern as the dense mask (Lq, Lk) it equals (the
 * reference's expansion, tests/ref_modern.c), for tests/ref.c; a new
 * buffer, or NULL without a pattern. */
static uint8_t *expand_pattern(attn_options *o, int64_t Lq, int64_t Lk)
{
    const attn_sparsity *s = &o->sparsity;
    if (s->pattern == ATTN_SPARSE_NONE)
        return NULL;
    rm_sparsity r = {(rm_pattern)s->pattern, s->window, s->global, s->n_global, s->block,
                     s->window_blocks, s->global_blocks, s->random_blocks, s->layout.data};
    uint8_t *dense = malloc((size_t)(Lq * Lk));
    rm_sparsity_expand(&r, Lq, Lk, RM_TOP_LEFT, o->seed, dense, NULL);
    memset(&o->sparsity, 0, sizeof o->sparsity);
    o->mask.rank = 2;
    o->mask.shape[0] = Lq;
    o->mask.shape[1] = Lk;
    o->mask.data = dense;
    return dense;
}

/* The job's result against the double-precision reference (tests/ref.c),
 * which needs the parameters: the seeded set when the job has none. */
static int job_matches_ref(job *j, const float *out, const float *w)
{
    attn_param_set *set = NULL;
    attn_error e;
    attn_request r = j->r;
    attn_mha_request m = j->m;
    size_t n_params = j->mha ? m.n_params : r.n_params;
    if (n_params == 0 &&
        (j->mha ? attn_mha_seed_params(&m, 0, &set, &e) : attn_seed_params(&r, 0, &set, &e)) ==
            ATTN_OK) {
        r.params = m.params = set->items;
        r.n_params = m.n_params = set->n;
    }
    double *ro = malloc(sizeof(double) * (size_t)j->sh.out_count);
    double *rw = malloc(sizeof(double) * (size_t)(j->sh.w_count ? j->sh.w_count : 1));
    double gap = INFINITY, gain = 0.0;
    const attn_tensor *q = j->mha ? &m.query : &r.query, *k = j->mha ? &m.key : &r.key;
    uint8_t *dense = expand_pattern(j->mha ? &m.opt : &r.opt, q->shape[1],
                                    (k->rank ? k : q)->shape[1]);
    int rc = j->mha ? ref_mha(&m, ro, w ? rw : NULL, &gain)
           : r.rule == ATTN_RULE_LINEAR || j->modern ? ref_modern(&r, ro, w ? rw : NULL)
           : ref_attention(&r, ro, w ? rw : NULL, &gap);
    int64_t bad = -1;
    int ok = rc == 0 && close_to(out, ro, j->sh.out_count, j->bf16, &bad) &&
             (!w || close_to(w, rw, j->sh.w_count, j->bf16, &bad));
    if (!ok)
        printf("     %s: differs from the reference at [%lld] (rc %d)\n", j->name,
               (long long)bad, rc);
    free(ro);
    free(rw);
    free(dense);
    attn_param_set_free(set);
    return ok;
}

static float rnd[1 << 17];

static attn_tensor R(int rank, int64_t a, int64_t b, int64_t c, int64_t offset)
{
    attn_tensor t = {.rank = rank, .shape = {a, b, c, 0}, .data = rnd + offset};
    return t;
}

/* The requests the allocation and thread tests run: every rule (with and
 * without parameters, with hard attention), multi-head fused, with kdim /
 * vdim, GQA, positional encoding, averaged weights and LayerNorm. */
static size_t make_jobs(job *jobs, attn_param_set **sets)
{
    size_t n = 0;
    int64_t B = 2, L = 48, D = 32;
    for (int rule = 0; rule < ATTN_RULE_COUNT; rule++)
        for (int given = 0; given < 2; given++) {
            job *j = &jobs[n++];
            memset(j, 0, sizeof *j);
            j->r = attn_request_default((attn_rule)rule);
            j->r.query = R(3, B, L, D, 0);
            int same = rule <= ATTN_RULE_SCALED_DOT || rule == ATTN_RULE_LINEAR;
            j->r.key = R(3, B, L, same ? D : D / 2, 5000);
            j->r.value = R(3, B, rule == ATTN_RULE_CONCAT ? 40 : L, 24, 10000);
            j->r.hidden_size = 20;
            j->r.opt.causal = rule != ATTN_RULE_CONCAT && given;
            if (rule == ATTN_RULE_SCALED_DOT && given) {
                j->r.opt.hard = ATTN_HARD_TOPK;
                j->r.opt.top_k = 3;
            }
            static char names[2 * ATTN_RULE_COUNT][48];
            snprintf(names[n - 1], sizeof names[0], "%s%s", attn_rule_name((attn_rule)rule),
                     given ? " (params given)" : "");
            j->name = names[n - 1];
            if (given && attn_seed_params(&j->r, 7, &sets[n - 1], NULL) == ATTN_OK) {
                j->r.params = sets[n - 1]->items;
                j->r.n_params = sets[n - 1]->n;
            }
        }
    static const float sinks[1] = {0.5f};
    for (int decode = 0; decode < 3; decode++) {
        job *j = &jobs[n++];
        memset(j, 0, sizeof *j);
        j->modern = 1;
        j->bf16 = decode == 2; /* its keys and values in bfloat16 from the workspace too */
        j->name = decode == 1 ? "scaled_dot, every option, decode (Lq = 1)"
                : decode ? "scaled_dot, every option, bf16" : "scaled_dot, every option";
        j->r = attn_request_default(ATTN_RULE_SCALED_DOT);
        j->r.opt.precision = j->bf16 ? ATTN_PRECISION_BF16 : ATTN_PRECISION_FP32;
        j->r.query = R(3, B, decode == 1 ? 1 : L, D, 0);
        j->r.key = R(3, B, 2 * L, D, 5000);
        j->r.value = R(3, B, 2 * L, decode == 2 ? 32 : 24, 10000);
        j->r.opt.need_weights = decode != 1;
        j->r.opt.align = ATTN_ALIGN_BOTTOM_RIGHT;
        j->r.opt.causal = 1;
        j->r.opt.has_window = 1;
        j->r.opt.window_left = 40;
        j->r.opt.softcap = 5.0f;
        j->r.opt.alibi = 1;
        j->r.opt.sinks = sinks;
        j->r.opt.n_sinks = 1;
        j->r.opt.rope.on = 1;
        j->r.opt.rope.offset = 3;
    }
    static const struct { const char *name; int64_t kd, vd, H, Hkv; int pe, avg, norm, need; } mh[] = {
        {"multihead self (fused)", 0, 0, 4, 0, 0, 0, 0, 1},
        {"multihead kdim/vdim, averaged, LayerNorm", 24, 16, 4, 0, 0, 1, 1, 1},
        {"multihead GQA, positional encoding, no weights", 24, 16, 4, 2, 1, 0, 0, 0},
        {"multihead self, bf16", 0, 0, 2, 0, 0, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof mh / sizeof mh[0]; i++) {
        job *j = &jobs[n++];
        memset(j, 0, sizeof *j);
        j->mha = 1;
        j->name = mh[i].name;
        j->m = attn_mha_request_default();
        j->m.query = R(3, B, L, D, 20000);
        if (mh[i].kd) {
            j->m.key = R(3, B, 40, mh[i].kd, 30000);
            j->m.value = R(3, B, 40, mh[i].vd, 40000);
        }
        j->m.num_heads = mh[i].H;
        j->m.num_kv_heads = mh[i].Hkv;
        j->m.positional_encoding = mh[i].pe ? ATTN_PE_SINUSOIDAL : ATTN_PE_NONE;
        j->m.average_weights = mh[i].avg;
        j->m.residual_norm = mh[i].norm;
        j->m.opt.need_weights = mh[i].need;
        j->m.opt.causal = !mh[i].kd;
        j->bf16 = strstr(mh[i].name, "bf16") != NULL;
        j->m.opt.precision = j->bf16 ? ATTN_PRECISION_BF16 : ATTN_PRECISION_FP32;
    }
    /* sparse attention: its pattern's pieces come from the workspace too */
    static const int64_t globals[2] = {3, 40};
    job *j = &jobs[n++];
    memset(j, 0, sizeof *j);
    j->name = "scaled_dot, local_global sparsity";
    j->r = attn_request_default(ATTN_RULE_SCALED_DOT);
    j->r.query = R(3, B, L, D, 0);
    j->r.key = R(3, B, L, D, 5000);
    j->r.value = R(3, B, L, 24, 10000);
    j->r.opt.sparsity.pattern = ATTN_SPARSE_LOCAL_GLOBAL;
    j->r.opt.sparsity.window = 5;
    j->r.opt.sparsity.global = globals;
    j->r.opt.sparsity.n_global = 2;
    j = &jobs[n++];
    memset(j, 0, sizeof *j);
    j->mha = 1;
    j->name = "multihead, bigbird sparsity, no weights";
    j->m = attn_mha_request_default();
    j->m.query = R(3, B, L, D, 20000);
    j->m.num_heads = 4;
    j->m.opt.need_weights = 0;
    j->m.opt.sparsity.pattern = ATTN_SPARSE_BIGBIRD;
    j->m.opt.sparsity.block = 8;
    j->m.opt.seed = 3;
    return n;
}

/* ------------------------------------------------------- allocations */

/* Each request twice on a fresh context of `threads` threads: the first
 * call may grow the workspace (and start the workers), the second, of the
 * same shape, must not allocate at all; both must match the reference. */
static void test_allocations(job *jobs, size_t n, int threads)
{
    printf("heap allocations, context of %d thread%s (first call / second call):\n", threads,
           threads > 1 ? "s" : "");
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        attn_ctx *ctx = attn_ctx_new(threads);
        long a0 = allocs();
        attn_status st1 = job_run(j, ctx, j->out, j->w);
        long a1 = allocs();
        attn_status st2 = job_run(j, ctx, j->out, j->w);
        long a2 = allocs();
        printf("  %-48s %4ld / %ld\n", j->name, a1 - a0, a2 - a1);
        char what[128];
        snprintf(what, sizeof what, "%s, %d threads: no allocation on the second call", j->name,
                 threads);
        check(st1 == ATTN_OK && st2 == ATTN_OK && a2 == a1, what,
              "status %d/%d, %ld allocations", st1, st2, a2 - a1);
        snprintf(what, sizeof what, "%s, %d threads: result", j->name, threads);
        check(st2 == ATTN_OK && job_matches_ref(j, j->out, j->w), what, "see above");
        attn_ctx_free(ctx);
    }
}

/* The workspace a context has taken: its regions' peaks, in bytes (0
 * without a context). */
static double workspace_used(const attn_ctx *ctx)
{
    double used = 0.0;
    for (int r = 0; ctx && r < ATTN_REGIONS; r++)
        used += (double)ctx->region[r].peak;
    return used;
}

/* What a call takes from a context of attn_ctx_new(0)'s threads is at
 * most what the plan said it would (scratch_bytes), and not wildly less. */
static void test_scratch_foretold(job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        attn_ctx *ctx = attn_ctx_new(0);
        attn_status st = job_run(j, ctx, j->out, j->w);
        double used = workspace_used(ctx);
        char what[128];
        snprintf(what, sizeof what, "%s: workspace within scratch_bytes", j->name);
        check(st == ATTN_OK && used <= j->sh.scratch_bytes && j->sh.scratch_bytes <= 4 * used + 65536,
              what, "took %.0f bytes, the plan said %.0f", used, j->sh.scratch_bytes);
        attn_ctx_free(ctx);
    }
}

/* bf16 grouped-query heads round each KV head's keys and values once,
 * not once per query head: 8 query heads of 64 rows over one KV head of
 * 2048 keys plan and take under half the workspace of the same heads over
 * 8 KV heads (the keys and values replicated), whose rounded copies are
 * most of it, and give the same bits. */
static void test_bf16_kv_shared(void)
{
    enum { H = 8, LQ = 64, LK = 2048, D = 64 };
    size_t nq = (size_t)H * LQ * D, nk = (size_t)H * LK * D;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    float *out[2] = {malloc(nq * sizeof(float)), malloc(nq * sizeof(float))};
    double used[2] = {0, 0}, planned[2] = {0, 0};
    attn_status st[2] = {ATTN_ERR_NOMEM, ATTN_ERR_NOMEM};
    for (size_t i = 0; q && i < nq; i++)
        q[i] = rnd[(i * 7) % (sizeof rnd / sizeof *rnd)];
    for (size_t i = 0; k && v && i < nk; i++) /* each KV head a copy of head 0 */
        k[i] = rnd[i % ((size_t)LK * D)], v[i] = rnd[(i + 999) % ((size_t)LK * D)];
    for (int t = 0; t < 2 && q && k && v && out[0] && out[1]; t++) {
        int64_t hkv = t ? H : 1;
        attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
        r.query = (attn_tensor){4, {1, H, LQ, D}, q};
        r.key = (attn_tensor){4, {1, hkv, LK, D}, k};
        r.value = (attn_tensor){4, {1, hkv, LK, D}, v};
        r.opt.precision = ATTN_PRECISION_BF16;
        r.opt.need_weights = 0;
        attn_shapes sh;
        attn_error e;
        attn_ctx *ctx = attn_ctx_new(0);
        if (ctx && attn_plan(&r, &sh, &e) == ATTN_OK &&
            (st[t] = attn_compute(ctx, &r, out[t], NULL, &e)) == ATTN_OK) {
            planned[t] = sh.scratch_bytes;
            used[t] = workspace_used(ctx);
        }
        attn_ctx_free(ctx);
    }
    int same = st[0] == ATTN_OK && st[1] == ATTN_OK && !memcmp(out[0], out[1], nq * sizeof(float));
    check(same, "bf16 GQA: one KV head for 8 query heads gives the bits of 8 equal KV heads",
          "status %d/%d", st[0], st[1]);
    check(same && used[0] <= planned[0] && used[1] <= planned[1],
          "bf16 GQA: the workspace within scratch_bytes", "took %.0f and %.0f bytes, planned %.0f and %.0f",
          used[0], used[1], planned[0], planned[1]);
    check(same && used[0] < 0.5 * used[1] && planned[0] < 0.5 * planned[1],
          "bf16 GQA: the keys and values rounded once a KV head",
          "one KV head took %.0f bytes (planned %.0f), eight %.0f (planned %.0f)", used[0],
          planned[0], used[1], planned[1]);
    free(q), free(k), free(v), free(out[0]), free(out[1]);
}

/* attn_max_threads is the CPUs this process may run on (its affinity,
 * asked here of the system) until set; set lower, it is what
 * attn_ctx_new(0) makes and what plans count each thread's scratch for:
 * non-causal linear attention keeps a sum per head per thread, so 1024
 * heads plan about two thirds of their scratch on one thread of two,
 * and a context of one thread takes no more than that plan. */
static void test_max_threads(void)
{
#ifdef __linux__
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    check(cpus < 1 || attn_max_threads() == cpus, "attn_max_threads: the affinity's CPUs",
          "%d, the affinity has %d", attn_max_threads(), cpus);
#endif
    enum { H = 1024, D = 48 };
    static float x[H * D];
    attn_request r = attn_request_default(ATTN_RULE_LINEAR);
    r.query = r.key = r.value = (attn_tensor){4, {1, H, 1, D}, x};
    r.opt.need_weights = 0;
    attn_shapes sh[2];
    attn_error e;
    attn_set_max_threads(2);
    attn_status st = attn_plan(&r, &sh[1], &e);
    attn_set_max_threads(1);
    attn_ctx *ctx = attn_ctx_new(0);
    st = st ? st : attn_plan(&r, &sh[0], &e);
    static float out[H * D];
    st = st || !ctx ? st : attn_compute(ctx, &r, out, NULL, &e);
    double used = workspace_used(ctx);
    check(st == ATTN_OK && ctx && ctx->threads == 1, "attn_set_max_threads(1): attn_ctx_new(0) has 1 thread",
          "status %d, %d threads", st, ctx ? ctx->threads : -1);
    check(st == ATTN_OK && sh[0].scratch_bytes < 0.75 * sh[1].scratch_bytes && used <= sh[0].scratch_bytes,
          "attn_set_max_threads: plans count its threads' scratch",
          "one thread planned %.0f bytes and took %.0f, two planned %.0f", sh[0].scratch_bytes, used,
          sh[1].scratch_bytes);
    attn_ctx_free(ctx);
    attn_set_max_threads(0);
    check(attn_max_threads() >= 1, "attn_set_max_threads(0): the default again", "%d", attn_max_threads());
}

/* -------------------------------------------------------- time limit */

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A scaled-dot request of H heads, Lq queries over Lk keys of width D,
 * without weights, its inputs from x (filled here, 2 H (Lq + Lk) D floats
 * from a fixed sequence). */
static attn_request long_request(float *x, int64_t H, int64_t Lq, int64_t Lk, int64_t D)
{
    uint32_t u = 12345;
    for (int64_t i = 0; i < H * (Lq + 2 * Lk) * D; i++) {
        u = u * 1664525u + 1013904223u;
        x[i] = (float)(u >> 8) / 16777216.0f - 0.5f;
    }
    attn_request r = attn_request_default(ATTN_RULE_SCALED_DOT);
    r.query = (attn_tensor){4, {1, H, Lq, D}, x};
    r.key = (attn_tensor){4, {1, H, Lk, D}, x + H * Lq * D};
    r.value = (attn_tensor){4, {1, H, Lk, D}, x + H * (Lq + Lk) * D};
    r.opt.need_weights = 0;
    return r;
}

/* A long_request with its inputs and two outputs (out[0] for a call
 * whole, out[1] for the one under test), n floats each. */
typedef struct {
    float *x, *out[2];
    size_t n;
    attn_request r;
} long_call;

static void long_call_new(long_call *c, int64_t H, int64_t Lq, int64_t Lk, int64_t D)
{
    c->n = (size_t)(H * Lq * D);
    c->x = malloc(sizeof(float) * (size_t)(H * (Lq + 2 * Lk) * D));
    c->out[0] = malloc(sizeof(float) * c->n);
    c->out[1] = malloc(sizeof(float) * c->n);
    c->r = long_request(c->x, H, Lq, Lk, D);
}

/* Whether the two outputs are the same bits. */
static int long_call_same(const long_call *c)
{
    return !memcmp(c->out[0], c->out[1], sizeof(float) * c->n);
}

static void long_call_free(long_call *c)
{
    free(c->x);
    free(c->out[0]);
    free(c->out[1]);
}

/* A call, timed: its status and seconds. */
static attn_status timed_call(attn_ctx *ctx, const attn_request *r, float *out, attn_error *e,
                              double *secs)
{
    double t0 = wall_s();
    attn_status st = attn_compute(ctx, r, out, NULL, e);
    *secs = wall_s() - t0;
    return st;
}

/* A call past its context's time limit stops there with ATTN_ERR_TIMEOUT
 * (on one thread and on two), and the context computes the next call
 * as before the limit. */
static void test_time_limit_stops(void)
{
    long_call c;
    long_call_new(&c, 8, 4096, 4096, 64);
    for (int threads = 1; threads <= 2; threads++) {
        attn_ctx *ctx = attn_ctx_new(threads);
        attn_error e;
        double full, cut, again;
        attn_status st0 = timed_call(ctx, &c.r, c.out[0], &e, &full);
        attn_ctx_set_time_limit(ctx, full / 20);
        attn_status st1 = timed_call(ctx, &c.r, c.out[1], &e, &cut);
        check(st0 == ATTN_OK && st1 == ATTN_ERR_TIMEOUT && cut < full / 2 &&
                  strstr(e.message, "time limit"),
              "attn_ctx_set_time_limit: a call stops at its limit",
              "%d threads: status %d then %d (\"%s\") after %.3f s, %.3f s without the limit of %.3f s",
              threads, st0, st1, e.message, cut, full, full / 20);
        attn_ctx_set_time_limit(ctx, 0.0);
        attn_status st2 = timed_call(ctx, &c.r, c.out[1], &e, &again);
        check(st2 == ATTN_OK && long_call_same(&c), "attn_ctx_set_time_limit(0): the next call whole",
              "%d threads: status %d", threads, st2);
        attn_ctx_free(ctx);
    }
    long_call_free(&c);
}

/* An interrupt's state: it says stop once `after` seconds have passed
 * since `start` (never when after < 0), and counts its calls. */
typedef struct {
    double start, after;
    _Atomic int polls;
} interrupt_state;

static attn_status interrupt_after(void *arg)
{
    interrupt_state *s = arg;
    atomic_fetch_add(&s->polls, 1);
    return s->after >= 0 && wall_s() - s->start >= s->after ? ATTN_ERR_CANCELLED : ATTN_OK;
}

/* One call under an interrupt that stops it `after` seconds in. */
static attn_status interrupted_call(attn_ctx *ctx, const attn_request *r, float *out, attn_error *e,
                                    interrupt_state *s, double after, double *secs)
{
    s->after = after;
    atomic_store(&s->polls, 0);
    attn_ctx_set_interrupt(ctx, interrupt_after, s);
    s->start = wall_s();
    return timed_call(ctx, r, out, e, secs);
}

/* The interrupt (attn_ctx_set_interrupt) is asked at the first task and
 * then about once a millisecond, never more often; its status stops the
 * call (one thread and two); one that says go on changes no bit; and a
 * context without it asks nothing. */
static void test_interrupt(void)
{
    long_call c;
    long_call_new(&c, 8, 2048, 2048, 64);
    interrupt_state s;
    for (int threads = 1; threads <= 2; threads++) {
        attn_ctx *ctx = attn_ctx_new(threads);
        attn_error e;
        double full, t;
        attn_status st = timed_call(ctx, &c.r, c.out[0], &e, &full);
        st |= interrupted_call(ctx, &c.r, c.out[1], &e, &s, -1, &t);
        int polls = atomic_load(&s.polls);
        check(st == ATTN_OK && long_call_same(&c) && polls >= 1 &&
                  polls <= t * 1000 + 2,
              "attn_ctx_set_interrupt: asked once a millisecond at most, the answer unchanged",
              "%d threads: status %d, asked %d times in %.4f s", threads, st, polls, t);
        st = interrupted_call(ctx, &c.r, c.out[1], &e, &s, 0, &t);
        polls = atomic_load(&s.polls);
        check(st == ATTN_ERR_CANCELLED && polls == 1 && t < full / 4 && strstr(e.message, "cancelled"),
              "attn_ctx_set_interrupt: a stop at the first task",
              "%d threads: status %d (\"%s\"), asked %d times, %.4f s of %.4f", threads, st,
              e.message, polls, t, full);
        st = interrupted_call(ctx, &c.r, c.out[1], &e, &s, full / 10, &t);
        check(st == ATTN_ERR_CANCELLED && t < full / 2, "attn_ctx_set_interrupt: a stop midway",
              "%d threads: status %d after %.4f s, %.4f s whole", threads, st, t, full);
        attn_ctx_set_interrupt(ctx, NULL, &s);
        atomic_store(&s.polls, 0);
        st = timed_call(ctx, &c.r, c.out[1], &e, &t);
        check(st == ATTN_OK && atomic_load(&s.polls) == 0 &&
                  long_call_same(&c),
              "attn_ctx_set_interrupt(NULL): none asked, the call whole", "%d threads: status %d, asked %d",
              threads, st, atomic_load(&s.polls));
        attn_ctx_free(ctx);
    }
    long_call_free(&c);
}

/* A limit that passes while rope's table of cos and sin is being filled
 * leaves it part-filled: the context's next call over the same positions
 * must fill it again, and answers as a fresh context does. */
static void test_time_limit_rope(void)
{
    long_call c;
    long_call_new(&c, 1, 1 << 18, 16, 16);
    c.r.opt.rope = (attn_rope){1, 10000.0f, ATTN_ROPE_HALF, 0, 0};
    attn_ctx *fresh = attn_ctx_new(2), *ctx = attn_ctx_new(2);
    attn_error e;
    double t[3];
    attn_status st0 = timed_call(fresh, &c.r, c.out[0], &e, &t[0]);
    attn_ctx_set_time_limit(ctx, 1e-3);
    attn_status st1 = timed_call(ctx, &c.r, c.out[1], &e, &t[1]);
    attn_ctx_set_time_limit(ctx, 0.0);
    attn_status st2 = timed_call(ctx, &c.r, c.out[1], &e, &t[2]);
    if (st1 == ATTN_OK) {
        printf("time limit during rope's table: the call took %.3f s, within the clock's tick; "
               "skipped\n", t[1]);
        n_skipped++;
    } else
        check(st0 == ATTN_OK && st1 == ATTN_ERR_TIMEOUT && st2 == ATTN_OK &&
                  long_call_same(&c),
              "time limit during rope's table: the next call fills it again",
              "status %d, %d, %d; %.3f s whole", st0, st1, st2, t[0]);
    attn_ctx_free(fresh);
    attn_ctx_free(ctx);
    long_call_free(&c);
}

/* ----------------------------------------------------------- threads */

/* Four tasks of two loops that can only finish together: each waits (up
 * to 10 s) until all four have started. Two callers with pools of two
 * threads each get there only if both loops run at once, each on its own
 * two threads. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
} bar = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void rendezvous(void *arg, int64_t task, int worker)
{
    (void)task;
    (void)worker;
    int *met = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&bar.mu);
    bar.arrived++;
    pthread_cond_broadcast(&bar.cv);
    while (bar.arrived < 4 && pthread_cond_timedwait(&bar.cv, &bar.mu, &until) == 0)
        ;
    if (bar.arrived >= 4)
        atomic_fetch_add((_Atomic int *)met, 1);
    pthread_mutex_unlock(&bar.mu);
}

static _Atomic int met;

static void *rendezvous_caller(void *arg)
{
    attn_ctx *ctx = arg;
    (void)ctx;
    attn_pool *pool = attn_pool_new(2);
    attn_pool *prev = attn_pool_use(pool);
    attn_pool_run(2, 2, rendezvous, (void *)&met);
    attn_pool_use(prev);
    attn_pool_free(pool);
    return NULL;
}

static void test_parallel_pools(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, rendezvous_caller, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    check(atomic_load(&met) == 4, "two pools of two threads run their loops at once",
          "%d of 4 tasks saw all four running", atomic_load(&met));
}

#ifdef __linux__
/* A worker that lingers on its caller's CPU is moved off it (pool.c): the
 * test pins the worker and itself to one CPU, lets the worker linger
 * there, and starts a loop; the worker's CPUs must then be the others it
 * started with. The linger lasts a millisecond, so a loaded machine may
 * let it lapse: a few tries. */
static _Atomic pid_t worker_tid;

static void note_worker(void *arg, int64_t task, int worker)
{
    (void)arg, (void)task;
    if (worker)
        atomic_store(&worker_tid, (pid_t)syscall(SYS_gettid));
    struct timespec d = {0, 50000}; /* long enough for the worker to join */
    nanosleep(&d, NULL);
}

/* One try: sets *moved when the worker's CPUs came out as the others. */
static void steer_try(const cpu_set_t *all, int *moved)
{
    atomic_store(&worker_tid, 0);
    sched_setaffinity(0, sizeof *all, all);
    attn_pool_run(2, 16, note_worker, NULL);
    pid_t tid = atomic_load(&worker_tid);
    int cpu = sched_getcpu();
    if (!tid || cpu < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(tid, sizeof one, &one) != 0 || sched_setaffinity(0, sizeof one, &one) != 0)
        return;
    struct timespec d = {0, 100000}; /* the worker runs, lingering on cpu */
    nanosleep(&d, NULL);
    attn_pool_run(2, 2, note_worker, NULL);
    cpu_set_t got;
    if (sched_getaffinity(tid, sizeof got, &got) != 0)
        return;
    cpu_set_t want = *all;
    CPU_CLR(cpu, &want);
    *moved = CPU_EQUAL(&got, &want);
}

/* Whether this process may run on 2 CPUs or more (all: its CPUs); when
 * not, the check named what is counted as skipped. */
static int two_cpus(const char *what, cpu_set_t *all)
{
    if (sched_getaffinity(0, sizeof *all, all) == 0 && CPU_COUNT(all) >= 2)
        return 1;
    printf("%s: fewer than 2 CPUs here, skipped\n", what);
    n_skipped++;
    return 0;
}

static void test_steering(void)
{
    cpu_set_t all;
    if (!two_cpus("pool steering", &all))
        return;
    attn_pool *p = attn_pool_new(2);
    attn_pool *prev = attn_pool_use(p);
    int moved = 0, tries = 0;
    for (; tries < 20 && !moved; tries++)
        steer_try(&all, &moved);
    attn_pool_use(prev);
    attn_pool_free(p);
    sched_setaffinity(0, sizeof all, &all);
    check(moved, "a worker lingering on its caller's CPU is moved to its other CPUs",
          "not moved in %d tries", tries);
}

/* Tasks go by CPU (pool.c): with the caller pinned to one CPU and the
 * worker to another, each runs the part of the tasks its CPU names (CPU
 * number modulo the two parts), whichever of the two CPUs the caller is
 * on; tasks handed out in arrival order would give the caller task 0
 * first, wherever it runs. A few tries, since a preempted thread lets
 * the other take its tasks. */
static int task_cpu[8];

static void note_cpu(void *arg, int64_t task, int worker)
{
    (void)arg;
    if (worker)
        atomic_store(&worker_tid, (pid_t)syscall(SYS_gettid));
    task_cpu[task] = sched_getcpu();
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do /* busy, so the thread keeps its CPU */
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000);
}

/* One try with the caller on CPU me and the worker on CPU other: 1 when
 * every task ran on the CPU its part names. */
static int parts_try(int me, int other)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(other, &one);
    pid_t tid = atomic_load(&worker_tid);
    if (!tid || sched_setaffinity(tid, sizeof one, &one) != 0)
        return 0;
    CPU_ZERO(&one);
    CPU_SET(me, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return 0;
    attn_pool_run(2, 8, note_cpu, NULL);
    for (int t = 0; t < 8; t++)
        if (task_cpu[t] != (t / 4 == me % 2 ? me : other))
            return 0;
    return 1;
}

static void test_tasks_by_cpu(void)
{
    cpu_set_t all;
    int cpu[2] = {-1, -1};
    if (sched_getaffinity(0, sizeof all, &all) == 0)
        for (int c = 0; c < CPU_SETSIZE && cpu[1] < 0; c++) /* an even and an odd CPU */
            if (CPU_ISSET(c, &all) && cpu[c % 2] < 0)
                cpu[c % 2] = c;
    if (cpu[0] < 0 || cpu[1] < 0) {
        printf("tasks by CPU: no even and odd CPU to run on here, skipped\n");
        n_skipped++;
        return;
    }
    attn_pool *p = attn_pool_new(2);
    attn_pool *prev = attn_pool_use(p);
    atomic_store(&worker_tid, 0);
    for (int i = 0; i < 20 && !atomic_load(&worker_tid); i++) /* the worker, to pin */
        attn_pool_run(2, 8, note_cpu, NULL);
    int ok[2] = {0, 0}, tries = 0;
    for (; tries < 40 && !(ok[0] && ok[1]); tries++)
        for (int c = 0; c < 2; c++)
            ok[c] = ok[c] || parts_try(cpu[c], cpu[1 - c]);
    attn_pool_use(prev);
    attn_pool_free(p);
    sched_setaffinity(0, sizeof all, &all);
    check(ok[0] && ok[1], "a loop's tasks run on the CPU their part names, whichever CPU calls",
          "caller on CPU %d: %s, on CPU %d: %s (%d tries)", cpu[0], ok[0] ? "yes" : "no", cpu[1],
          ok[1] ? "yes" : "no", tries);
}

/* The scheduler state of thread tid ('R' running or runnable, 'S'
 * sleeping, ...), '?' when unknown. */
static char thread_state(pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    char *paren = got ? strrchr(line, ')') : NULL;
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* Microseconds since t0 on CLOCK_MONOTONIC. */
static double us_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e6 + (double)(t.tv_nsec - t0->tv_nsec) * 1e-3;
}

/* Whether the worker sleeps ('S') within us microseconds. */
static int sleeps_within(pid_t tid, double us)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (us_since(&t0) < us)
        if (thread_state(tid) == 'S') return 1;
    return 0;
}

/* After a long call (attn_pool_settle with 10 ms) the worker goes to
 * sleep at once, where after a short one (1 us) it lingers, polling for
 * the next loop, for a millisecond: so within 600 us it must sleep after
 * the long call, and must not after the short one (which shows the check
 * can tell the two apart). A few tries, as a loaded machine may keep the
 * worker from running at all. */
static void test_settle(void)
{
    cpu_set_t all;
    if (!two_cpus("pool settle", &all))
        return;
    attn_pool *p = attn_pool_new(2);
    attn_pool *prev = attn_pool_use(p);
    int lingers = 0, rests = 0, tries = 0;
    for (; tries < 10 && !(lingers && rests); tries++) {
        atomic_store(&worker_tid, 0);
        attn_pool_run(2, 16, note_worker, NULL);
        pid_t tid = atomic_load(&worker_tid);
        if (!tid) continue;
        attn_pool_settle(p, 1000);
        lingers = lingers || !sleeps_within(tid, 600);
        struct timespec d = {0, 2000000}; /* past the linger: asleep */
        nanosleep(&d, NULL);
        attn_pool_run(2, 16, note_worker, NULL);
        attn_pool_settle(p, 10000000);
        rests = rests || sleeps_within(tid, 600);
    }
    attn_pool_use(prev);
    attn_pool_free(p);
    check(lingers && rests, "after a long call the pool's workers sleep at once, after a short one they linger",
          "lingered after a short call: %s, slept after a long one: %s (%d tries)",
          lingers ? "yes" : "no", rests ? "yes" : "no", tries);
}
#else
static void test_settle(void)
{
    printf("pool settle: Linux only, skipped\n");
    n_skipped++;
}

static void test_steering(void)
{
    printf("pool steering: Linux only, skipped\n");
    n_skipped++;
}

static void test_tasks_by_cpu(void)
{
    printf("tasks by CPU: Linux only, skipped\n");
    n_skipped++;
}
#endif

/* Each thread runs every job `rounds` times on a context of its own (two
 * threads) and compares each result with the one-thread result, bit for
 * bit (every kernel task computes whole rows, whoever runs it). */
typedef struct {
    job *jobs;
    size_t n;
    int rounds;
    int bad; /* results that differed */
    int failed; /* calls that failed */
} worker_arg;

static void *compute_worker(void *p)
{
    worker_arg *a = p;
    attn_ctx *ctx = attn_ctx_new(2);
    for (int r = 0; r < a->rounds; r++)
        for (size_t i = 0; i < a->n; i++) {
            job *j = &a->jobs[i];
            float *out = malloc(sizeof(float) * (size_t)j->sh.out_count);
            float *w = j->w ? malloc(sizeof(float) * (size_t)j->sh.w_count) : NULL;
            if (job_run(j, ctx, out, w) != ATTN_OK)
                a->failed++;
            else if (memcmp(out, j->out, sizeof(float) * (size_t)j->sh.out_count) != 0 ||
                     (w && memcmp(w, j->w, sizeof(float) * (size_t)j->sh.w_count) != 0))
                a->bad++;
            free(out);
            free(w);
        }
    attn_ctx_free(ctx);
    return NULL;
}

static void test_concurrent_contexts(job *jobs, size_t n)
{
    attn_ctx *one = attn_ctx_new(1);
    for (size_t i = 0; i < n; i++)
        job_run(&jobs[i], one, jobs[i].out, jobs[i].w);
    attn_ctx_free(one);
    worker_arg a[2] = {{jobs, n, 5, 0, 0}, {jobs, n, 5, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, compute_worker, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        check(a[i].bad == 0 && a[i].failed == 0, "two threads, a context each: the same results",
              "thread %d: %d results differ, %d calls failed", i, a[i].bad, a[i].failed);
}

/* ------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
    for (int i = 0; i < 64; i++)
        data[i] = (float)((i * 37) % 11) / 8.0f - 0.6f;

    /* The counter must see the library's allocations, or every "no
     * allocation" below would pass vacuously. */
    long a0 = allocs();
    attn_ctx *c = attn_ctx_new(1);
    if (COUNTING)
        check(c && allocs() > a0, "allocation counter sees the library", "%ld allocations",
              allocs() - a0);
    else
        printf("allocations are not counted under AddressSanitizer: those checks are skipped\n");
    attn_ctx_free(c);

    for (int rule = 0; rule < ATTN_RULE_COUNT; rule++)
        test_rule_cost((attn_rule)rule);
    test_mha_cost(0, 0, 2, 0, 0);
    test_mha_cost(0, 0, 2, 0, 1);
    test_mha_cost(6, 7, 4, 0, 0);
    test_mha_cost(6, 7, 4, 2, 1);
    test_pipeline_cost();
    test_hostile_cost();

    for (size_t i = 0; i < sizeof rnd / sizeof rnd[0]; i++)
        rnd[i] = (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
    job jobs[2 * ATTN_RULE_COUNT + 9];
    attn_param_set *sets[2 * ATTN_RULE_COUNT + 9] = {0};
    size_t n = make_jobs(jobs, sets);
    int planned = 1;
    for (size_t i = 0; i < n; i++)
        planned &= job_plan(&jobs[i]) == ATTN_OK;
    if (planned) {
        test_allocations(jobs, n, 1);
        test_allocations(jobs, n, 2);
        test_scratch_foretold(jobs, n);
        test_concurrent_contexts(jobs, n);
    }
    test_bf16_kv_shared();
    test_max_threads();
    test_time_limit_stops();
    test_time_limit_rope();
    test_interrupt();
    test_parallel_pools();
    test_steering();
    test_settle();
    test_tasks_by_cpu();
    for (size_t i = 0; i < n; i++) {
        job_free(&jobs[i]);
        attn_param_set_free(sets[i]);
    }

    printf("%d passed, %d failed, %d skipped\n", n_passed, n_failed, n_skipped);
    return n_failed ? 1 : 0;
}
