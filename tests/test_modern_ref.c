/* test_modern_ref.c - checks the C reference of the modern attention options
 * (ref_modern.c) against the PyTorch golden vectors in tests/golden_modern/,
 * so the two independent references are known to agree before lib/ is
 * checked against either.
 *
 * Usage: test_modern_ref [dir]   (default tests/golden_modern)
 *
 * Each case file is read with tests/golden.c (inputs, options, parameters),
 * turned into an rm_request and computed. The expectations are read again
 * here as doubles (golden.c keeps floats; the generator writes them with 17
 * digits). Tolerance: |got - want| <= 1e-12 + 1e-9 |want| for outputs and
 * weights (both references are double; what differs is the order of sums
 * and the libm), exact for block layouts, one-hot sample weights and the
 * seeded parameters (bit for bit, float32). Also checked: the hard choices
 * are not near ties (margin > 1e-5), the SplitMix64 jump, and ALiBi slopes
 * for powers of two. Prints one line per failure and "N passed, N failed".
 */
#include "golden.h"
#include "ref_modern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_ABS 1e-12
#define TOL_REL 1e-9
#define MAX_ALLOCS 64

static int n_pass, n_fail;

static void check(int ok, const char *name, const char *what)
{
    if (ok)
        n_pass++;
    else {
        n_fail++;
        printf("FAIL %s: %s\n", name, what);
    }
}

/* Allocations of one case, freed together. */
typedef struct {
    void *p[MAX_ALLOCS];
    int n;
} pool;

static void *pool_take(pool *pl, void *p)
{
    if (p && pl->n < MAX_ALLOCS)
        pl->p[pl->n++] = p;
    else if (p) {
        free(p);
        p = NULL;
    }
    return p;
}

static void pool_free(pool *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->p[i]);
    pl->n = 0;
}

static double *to_double(pool *pl, const golden_tensor *t)
{
    if (!t)
        return NULL;
    double *d = pool_take(pl, malloc(sizeof(double) * (size_t)(t->count ? t->count : 1)));
    if (d)
        for (int64_t i = 0; i < t->count; i++)
            d[i] = t->f[i];
    return d;
}

/* A parameter given as values, or (seeded cases) the expected one. */
static double *param(pool *pl, const golden_case *c, const char *name)
{
    const golden_tensor *t = golden_get(c, GOLDEN_PARAM, name);
    if (!t)
        t = golden_get(c, GOLDEN_EXPECT, name);
    return to_double(pl, t);
}

/* The values of "expect <name> ..." as doubles (golden.c rounds to float). */
static double *expect_doubles(pool *pl, const char *path, const char *name, int64_t *count)
{
    FILE *fp = fopen(path, "r");
    char line[1024], key[80];
    double *v = NULL;
    *count = -1;
    if (!fp)
        return NULL;
    snprintf(key, sizeof key, "expect %s ", name);
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, key, strlen(key)) != 0)
            continue;
        char *p = line + strlen(key), *end;
        long rank = strtol(p, &end, 10);
        int64_t n = 1;
        for (long d = 0; d < rank; d++)
            n *= strtoll(end, &end, 10);
        v = pool_take(pl, malloc(sizeof(double) * (size_t)(n ? n : 1)));
        if (!v)
            break;
        for (int64_t i = 0; i < n; i++)
            if (fscanf(fp, "%lf", &v[i]) != 1) {
                fclose(fp);
                return NULL;
            }
        *count = n;
        break;
    }
    fclose(fp);
    return v;
}

static int opt_is(const golden_case *c, const char *key, const char *val)
{
    const char *v = golden_opt(c, key);
    return v && strcmp(v, val) == 0;
}

static int64_t opt_int(const golden_case *c, const char *key, int64_t def)
{
    return (int64_t)golden_opt_int(c, key, def);
}

/* Every option line the generator writes; anything else is a format drift. */
static const char *const known_opts[] = {
    "align", "causal", "window", "scale", "softcap", "alibi", "rope", "rope.base",
    "rope.style", "rope.dims", "rope.offset", "hard", "sparsity", "sparsity.window",
    "sparsity.block", "sparsity.window_blocks", "sparsity.global_blocks",
    "sparsity.random_blocks", "sparsity.global", "return_layout", "feature_map",
    "need_weights", "seed", "num_heads", "num_kv_heads", "attention", "average_weights",
    "positional_encoding", "residual_norm", "hidden_size", "output_size", NULL};

static const char *unknown_option(const golden_case *c)
{
    for (size_t i = 0; i < c->n_options; i++) {
        int found = 0;
        for (const char *const *k = known_opts; *k; k++)
            found |= strcmp(*k, c->options[i].key) == 0;
        if (!found)
            return c->options[i].key;
    }
    return NULL;
}

/* Rank and batch of an input tensor: rank 3 = (B, L, D), rank 2 = (L, D). */
static void dims3(const golden_tensor *t, int64_t *B, int64_t *L, int64_t *D)
{
    int batched = t->rank == 3;
    *B = batched ? t->shape[0] : 1;
    *L = t->shape[batched];
    *D = t->shape[batched + 1];
}

/* Checks the seeded parameters bit for bit: the uniform ones as lib/attn.h
 * documents them (golden_fill_uniform), then pos_embedding.weight by the
 * Box-Muller spec in ref_modern.h, from the same stream. */
static void check_seeded(const golden_case *c, const char *name)
{
    uint64_t state = strtoull(golden_opt(c, "seed"), NULL, 10);
    int64_t E = 0;
    const golden_tensor *q = golden_get(c, GOLDEN_TENSOR, "query");
    E = q->shape[q->rank - 1];
    for (size_t i = 0; i < c->n_tensors; i++) {
        const golden_tensor *t = &c->tensors[i];
        if (t->kind != GOLDEN_EXPECT || !strcmp(t->name, "output") ||
            !strcmp(t->name, "weights") || !strcmp(t->name, "layout"))
            continue;
        float *got = malloc(sizeof(float) * (size_t)t->count);
        char what[160];
        if (!got)
            return;
        if (!strcmp(t->name, "pos_embedding.weight")) {
            rm_normal_fill(&state, got, t->count);
        } else if (!strncmp(t->name, "norm.", 5)) {
            for (int64_t k = 0; k < t->count; k++)
                got[k] = !strcmp(t->name, "norm.weight") ? 1.0f : 0.0f;
        } else {
            /* fan_in: the input width, E for every projection here (kdim = vdim = E) */
            golden_fill_uniform(&state, got, t->count, E);
        }
        snprintf(what, sizeof what, "seeded %s differs from the spec", t->name);
        check(memcmp(got, t->f, sizeof(float) * (size_t)t->count) == 0, name, what);
        free(got);
    }
}

static void compare(const char *name, const char *what, const double *got, const double *want,
                    int64_t n)
{
    double worst = 0.0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (d > TOL_ABS + TOL_REL * fabs(want[i]) && d > worst) {
            worst = d;
            at = i;
        }
    }
    char msg[200];
    if (at >= 0)
        snprintf(msg, sizeof msg, "%s[%lld] = %.17g, expected %.17g", what, (long long)at,
                 got[at], want[at]);
    else
        snprintf(msg, sizeof msg, "%s", what);
    check(at < 0, name, msg);
}

static int run_case(const char *path)
{
    golden_case c;
    char err[512];
    pool pl = {{0}, 0};
    rm_request r;
    int64_t tmp, Bq;
    int multihead;
    const char *s;
    if (golden_load(path, &c, err, sizeof err) != 0) {
        check(0, path, err);
        return -1;
    }
    const char *name = c.name;
    if ((s = unknown_option(&c)) != NULL) {
        check(0, name, "unknown option line (format drift)");
        golden_free(&c);
        return -1;
    }
    memset(&r, 0, sizeof r);
    multihead = !strcmp(c.rule, "multihead");
    if (!strcmp(c.rule, "dot"))
        r.rule = RM_DOT;
    else if (!strcmp(c.rule, "scaled_dot"))
        r.rule = RM_SCALED_DOT;
    else if (!strcmp(c.rule, "general"))
        r.rule = RM_GENERAL;
    else if (!strcmp(c.rule, "additive"))
        r.rule = RM_ADDITIVE;
    else if (!strcmp(c.rule, "concat_tanh"))
        r.rule = RM_CONCAT_TANH;
    else if (!strcmp(c.rule, "concat"))
        r.rule = RM_CONCAT;
    else if (!strcmp(c.rule, "linear"))
        r.rule = RM_LINEAR;
    else if (multihead)
        r.rule = RM_MULTIHEAD;
    else {
        check(0, name, "unknown rule");
        golden_free(&c);
        return -1;
    }

    /* Inputs. */
    const golden_tensor *tq = golden_get(&c, GOLDEN_TENSOR, "query");
    const golden_tensor *tk = golden_get(&c, GOLDEN_TENSOR, "key");
    const golden_tensor *tv = golden_get(&c, GOLDEN_TENSOR, "value");
    if (!tk)
        tk = tq; /* multi-head self-attention */
    if (!tv)
        tv = tq;
    dims3(tq, &r.B, &r.Lq, &r.Dq);
    dims3(tk, &Bq, &tmp, &r.Dk);
    dims3(tv, &Bq, &r.Lk, &r.Dv);
    int batched = tq->rank == 3;
    r.query = to_double(&pl, tq);
    r.key = to_double(&pl, tk);
    r.value = to_double(&pl, tv);

    /* Parameters. */
    r.W1 = r.b1 = r.W2 = r.b2 = r.vw = NULL;
    switch (r.rule) {
    case RM_GENERAL:
        r.W1 = param(&pl, &c, "attn.weight");
        r.b1 = param(&pl, &c, "attn.bias");
        break;
    case RM_ADDITIVE:
        r.W1 = param(&pl, &c, "query_proj.weight");
        r.W2 = param(&pl, &c, "key_proj.weight");
        r.b2 = param(&pl, &c, "key_proj.bias");
        r.vw = param(&pl, &c, "v.weight");
        r.Dh = golden_get(&c, GOLDEN_PARAM, "query_proj.weight")->shape[0];
        break;
    case RM_CONCAT_TANH:
        r.W1 = param(&pl, &c, "attn.weight");
        r.b1 = param(&pl, &c, "attn.bias");
        r.Dh = golden_get(&c, GOLDEN_PARAM, "attn.weight")->shape[0];
        break;
    case RM_CONCAT:
        r.W1 = param(&pl, &c, "att_weight.weight");
        r.b1 = param(&pl, &c, "att_weight.bias");
        r.W2 = param(&pl, &c, "out.weight");
        r.b2 = param(&pl, &c, "out.bias");
        r.Dout = golden_get(&c, GOLDEN_PARAM, "out.weight")->shape[0];
        break;
    case RM_MULTIHEAD: {
        int64_t E = r.Dq;
        r.H = opt_int(&c, "num_heads", 1);
        r.Hkv = opt_int(&c, "num_kv_heads", r.H);
        double *w;
        if ((w = param(&pl, &c, "in_proj_weight")) != NULL) {
            double *b = param(&pl, &c, "in_proj_bias");
            r.Wq = w;
            r.Wk = w + E * E;
            r.Wv = w + 2 * E * E;
            r.bq = b;
            r.bk = b ? b + E : NULL;
            r.bv = b ? b + 2 * E : NULL;
            r.Wo = param(&pl, &c, "out_proj.weight");
            r.bo = param(&pl, &c, "out_proj.bias");
        } else {
            r.Wq = param(&pl, &c, "W_q.weight");
            r.bq = param(&pl, &c, "W_q.bias");
            r.Wk = param(&pl, &c, "W_k.weight");
            r.bk = param(&pl, &c, "W_k.bias");
            r.Wv = param(&pl, &c, "W_v.weight");
            r.bv = param(&pl, &c, "W_v.bias");
            r.Wo = param(&pl, &c, "W_o.weight");
            r.bo = param(&pl, &c, "W_o.bias");
        }
        r.norm_w = param(&pl, &c, "norm.weight");
        r.norm_b = param(&pl, &c, "norm.bias");
        r.residual_norm = opt_int(&c, "residual_norm", 0) != 0;
        r.average_weights = opt_int(&c, "average_weights", 0) != 0;
        r.linear = opt_is(&c, "attention", "linear");
        if (opt_is(&c, "positional_encoding", "sinusoidal"))
            r.posenc = RM_PE_SINUSOIDAL;
        else if (opt_is(&c, "positional_encoding", "learned")) {
            r.posenc = RM_PE_LEARNED;
            r.pos_table = param(&pl, &c, "pos_embedding.weight");
        }
        break;
    }
    default:
        break;
    }
    int64_t H = multihead ? r.H : 1;

    /* Options. */
    if ((s = golden_opt(&c, "scale")) != NULL) {
        r.has_scale = 1;
        r.scale = (float)strtod(s, NULL);
    }
    const golden_tensor *t;
    if ((t = golden_get(&c, GOLDEN_MASK, "mask")) != NULL) {
        r.mask = t->m;
        r.mask_rank = t->rank;
    }
    if ((t = golden_get(&c, GOLDEN_MASK, "key_mask")) != NULL) {
        r.key_mask = t->m;
        r.key_mask_rank = t->rank;
    }
    if ((t = golden_get(&c, GOLDEN_TENSOR, "bias")) != NULL) {
        r.bias = to_double(&pl, t);
        r.bias_rank = t->rank;
    }
    r.causal = opt_int(&c, "causal", 0) != 0;
    r.align = opt_is(&c, "align", "bottom_right") ? RM_BOTTOM_RIGHT : RM_TOP_LEFT;
    if ((s = golden_opt(&c, "window")) != NULL) {
        char a[32] = "", b[32] = "";
        int n = sscanf(s, "%31s %31s", a, b);
        r.has_window = 1;
        r.left = strcmp(a, "null") ? strtoll(a, NULL, 10) : -1;
        r.right = n < 2 ? r.left : (strcmp(b, "null") ? strtoll(b, NULL, 10) : -1);
    }
    if ((s = golden_opt(&c, "softcap")) != NULL)
        r.softcap = (float)strtod(s, NULL);
    if ((t = golden_get(&c, GOLDEN_TENSOR, "alibi")) != NULL) {
        r.alibi = to_double(&pl, t);
    } else if (opt_int(&c, "alibi", 0)) {
        double *sl = pool_take(&pl, malloc(sizeof(double) * (size_t)H));
        rm_alibi_slopes(H, sl);
        r.alibi = sl;
    }
    if ((t = golden_get(&c, GOLDEN_TENSOR, "sinks")) != NULL)
        r.sinks = to_double(&pl, t);
    if (opt_int(&c, "rope", 0)) {
        r.rope.on = 1;
        r.rope.base = golden_opt(&c, "rope.base") ? strtod(golden_opt(&c, "rope.base"), NULL)
                                                  : 10000.0;
        r.rope.style = opt_is(&c, "rope.style", "interleaved") ? RM_ROPE_INTERLEAVED
                                                               : RM_ROPE_HALF;
        r.rope.dims = opt_int(&c, "rope.dims", 0);
        r.rope.offset = opt_int(&c, "rope.offset", 0);
    }
    if ((s = golden_opt(&c, "hard")) != NULL) {
        if (!strcmp(s, "argmax"))
            r.hard = RM_HARD_ARGMAX;
        else if (!strncmp(s, "top_k", 5)) {
            r.hard = RM_HARD_TOPK;
            r.top_k = strtoll(s + 5, NULL, 10);
        } else if (!strncmp(s, "sample", 6)) {
            r.hard = RM_HARD_SAMPLE;
            r.temperature = s[6] ? (float)strtod(s + 6, NULL) : 1.0;
        }
    }
    r.seed = golden_opt(&c, "seed") ? strtoull(golden_opt(&c, "seed"), NULL, 10) : 0;
    int64_t globals[64];
    if ((s = golden_opt(&c, "sparsity")) != NULL) {
        rm_sparsity *sp = &r.sparsity;
        if (!strcmp(s, "local_global"))
            sp->pattern = RM_SPARSE_LOCAL_GLOBAL;
        else if (!strcmp(s, "bigbird"))
            sp->pattern = RM_SPARSE_BIGBIRD;
        else
            sp->pattern = RM_SPARSE_BLOCKS;
        sp->window = opt_int(&c, "sparsity.window", 0);
        sp->block = opt_int(&c, "sparsity.block", 1);
        sp->window_blocks = opt_int(&c, "sparsity.window_blocks", 3);
        sp->global_blocks = opt_int(&c, "sparsity.global_blocks", 2);
        sp->random_blocks = opt_int(&c, "sparsity.random_blocks", 3);
        const char *g = golden_opt(&c, "sparsity.global");
        char *end;
        while (g && sp->n_global < 64) {
            long long v = strtoll(g, &end, 10);
            if (end == g)
                break;
            globals[sp->n_global++] = v;
            g = end;
        }
        sp->global = globals;
        if ((t = golden_get(&c, GOLDEN_MASK, "sparsity.layout")) != NULL)
            sp->layout = t->m;
    }
    r.feature_map = opt_is(&c, "feature_map", "relu") ? RM_FM_RELU : RM_FM_ELU;

    /* Compute and compare. */
    int64_t Dout = multihead ? r.Dq : (r.rule == RM_CONCAT ? r.Dout : r.Dv);
    int64_t n_out = r.B * r.Lq * Dout;
    int64_t n_w = (multihead && !r.average_weights ? H : 1) * r.B * r.Lq * r.Lk;
    double *out = pool_take(&pl, malloc(sizeof(double) * (size_t)n_out));
    double *w = pool_take(&pl, malloc(sizeof(double) * (size_t)n_w));
    int64_t b = r.sparsity.block ? r.sparsity.block : 1;
    int64_t n_lay = ((r.Lq + b - 1) / b) * ((r.Lk + b - 1) / b);
    uint8_t *lay = pool_take(&pl, calloc((size_t)n_lay, 1));
    rm_margin m;
    (void)batched;
    if (!out || !w || !lay || rm_compute(&r, out, w, lay, &m) != 0) {
        check(0, name, "rm_compute failed (missing parameter or out of memory)");
        pool_free(&pl);
        golden_free(&c);
        return -1;
    }
    int64_t cnt;
    double *want = expect_doubles(&pl, path, "output", &cnt);
    check(want && cnt == n_out, name, "expected output missing or of another size");
    if (want && cnt == n_out)
        compare(name, "output", out, want, n_out);
    want = expect_doubles(&pl, path, "weights", &cnt);
    if (want) {
        check(cnt == n_w, name, "expected weights of another size");
        if (cnt == n_w)
            compare(name, "weights", w, want, n_w);
    }
    want = expect_doubles(&pl, path, "layout", &cnt);
    if (want) {
        int same = cnt == n_lay;
        for (int64_t i = 0; same && i < cnt; i++)
            same = (double)lay[i] == want[i];
        check(same, name, "block layout");
    }
    check(m.hard_gap > 1e-5 && m.sample_gap > 1e-5, name,
          "a hard choice is near a tie (margin <= 1e-5)");
    if (golden_opt(&c, "seed") && (golden_get(&c, GOLDEN_EXPECT, "W_o.weight") ||
                                   golden_get(&c, GOLDEN_EXPECT, "in_proj_weight")))
        check_seeded(&c, name);
    pool_free(&pl);
    golden_free(&c);
    return 0;
}

static void self_checks(void)
{
    uint64_t st = 1234567;
    uint64_t want[3] = {UINT64_C(6457827717110365317), UINT64_C(3203168211198807973),
                        UINT64_C(9817491932198370423)};
    int ok = 1;
    for (int n = 0; n < 3; n++) {
        uint64_t x = rm_splitmix64(&st);
        ok &= x == want[n] && rm_splitmix64_at(1234567, (uint64_t)n) == want[n];
    }
    check(ok, "self", "SplitMix64 outputs and jumps");
    double sl[16];
    ok = 1;
    for (int H = 1; H <= 16; H *= 2) {
        rm_alibi_slopes(H, sl);
        for (int h = 1; h <= H; h++)
            ok &= sl[h - 1] == pow(2.0, -8.0 * h / H);
    }
    rm_alibi_slopes(6, sl);
    ok &= sl[0] == 0.25 && sl[1] == 0.0625 && sl[2] == 0.015625 && sl[3] == 0.00390625 &&
          sl[4] == 0.5 && sl[5] == 0.125;
    check(ok, "self", "ALiBi slopes (powers of two, and H = 6)");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/golden_modern";
    char **paths;
    int n = golden_list(dir, &paths);
    if (n <= 0) {
        printf("no case files in %s\n", dir);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    self_checks();
    for (int i = 0; i < n; i++)
        run_case(paths[i]);
    golden_list_free(paths, n);
    printf("test_modern_ref: %d case files\n", n);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
