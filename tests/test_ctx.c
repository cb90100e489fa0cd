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

#include "attn.h"
#include "ref.h"

/* ------------------------------------------------ allocation counting */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic long n_allocs;

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

static long allocs(void)
{
    return atomic_load(&n_allocs);
}

/* ------------------------------------------------------------ checks */

static int n_passed, n_failed;
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

/* A request planned with its seeded parameters given costs what it cost
 * planned without them. */
static void check_same_cost(attn_status st, const attn_shapes *got, const attn_shapes *want,
                            const char *what)
{
    check(st == ATTN_OK && near(got->param_floats, want->param_floats) &&
              near(got->flops, want->flops) && near(got->scratch_bytes, want->scratch_bytes),
          what, "status %d; %.17g %.17g %.17g vs %.17g %.17g %.17g", st, got->param_floats,
          got->flops, got->scratch_bytes, want->param_floats, want->flops, want->scratch_bytes);
}

/* The FLOPs of one rule written out from the formulas (2 per multiply-add,
 * 3 per tanh score term): projections, scores, weighted sum. */
static double want_flops(attn_rule rule, double B, double Lq, double Lk, double Dq, double Dk,
                         double Dv, double Lv, double dh, double dout)
{
    switch (rule) {
    case ATTN_RULE_DOT:
    case ATTN_RULE_SCALED_DOT:
        return 2 * B * Lq * Lk * Dk + 2 * B * Lq * Lk * Dv;
    case ATTN_RULE_GENERAL:
        return 2 * B * Lk * Dk * Dq + 2 * B * Lq * Lk * Dq + 2 * B * Lq * Lk * Dv;
    case ATTN_RULE_ADDITIVE:
    case ATTN_RULE_CONCAT_TANH:
        return 2 * B * Lq * Dq * dh + 2 * B * Lk * Dk * dh + 3 * B * Lq * Lk * dh +
               2 * B * Lq * Lk * Dv;
    default: /* concat: scores from [q; k], attention over Lv, out([q; c]) */
        return 2 * B * Lq * Lv * (Dq + Dk) + 2 * B * Lq * Lv * Dv + 2 * B * Lq * dout * (Dq + Dv);
    }
}

static void test_rule_cost(attn_rule rule)
{
    char what[96];
    int64_t B = 2, Lq = 3, Lk = 3, Dq = 4, Dk = rule <= ATTN_RULE_GENERAL ? 4 : 5, Dv = 6;
    int64_t Lv = rule == ATTN_RULE_CONCAT ? 7 : Lk, dh = 9, dout = 11;
    if (rule == ATTN_RULE_GENERAL)
        Dk = 5;
    if (rule == ATTN_RULE_DOT || rule == ATTN_RULE_SCALED_DOT)
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
    check_same_cost(st, &sh2, &sh, what);
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
    double f = 2.0 * B * (2.0 * Lq * E * E + Lk * ekv * (kd + vd)) + 4.0 * B * Lq * Lk * E;
    check(near(sh.flops, f), what, "flops %.17g, want %.17g", sh.flops, f);
    m.params = set->items;
    m.n_params = set->n;
    st = attn_mha_plan(&m, &sh2, &e);
    strcat(what, ", params given");
    check_same_cost(st, &sh2, &sh, what);
    attn_param_set_free(set);
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
    check(c && allocs() > a0, "allocation counter sees the library", "%ld allocations",
          allocs() - a0);
    attn_ctx_free(c);

    for (int rule = 0; rule < ATTN_RULE_COUNT; rule++)
        test_rule_cost((attn_rule)rule);
    test_mha_cost(0, 0, 2, 0, 0);
    test_mha_cost(0, 0, 2, 0, 1);
    test_mha_cost(6, 7, 4, 0, 0);
    test_mha_cost(6, 7, 4, 2, 1);
    test_hostile_cost();

    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
