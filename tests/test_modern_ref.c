/* test_modern_ref.c - checks the C reference of the modern attention options
 * (ref_modern.c) against the PyTorch golden vectors in tests/golden_modern/,
 * so the two independent references are known to agree before lib/ is
 * checked against either.
 *
 * Usage: test_modern_ref [dir]   (default tests/golden_modern)
 *
 * Each case file is read with tests/modern_case.c (golden.c's reader, then
 * the options and parameters as an rm_request) and computed. The
 * expectations are read again here as doubles (golden.c keeps floats; the generator writes them with 17
 * digits). Tolerance: |got - want| <= 1e-12 + 1e-9 |want| for outputs and
 * weights (both references are double; what differs is the order of sums
 * and the libm), exact for block layouts, one-hot sample weights and the
 * seeded parameters (bit for bit, float32). Also checked: the hard choices
 * are not near ties (margin > 1e-5), the SplitMix64 jump, and ALiBi slopes
 * for powers of two. Prints one line per failure and "N passed, N failed".
 */
#include "modern_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_ABS 1e-12
#define TOL_REL 1e-9

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

/* The values of "expect <name> ..." as doubles (golden.c rounds to float). */
static double *expect_doubles(mc_pool *pl, const char *path, const char *name, int64_t *count)
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
        v = mc_pool_take(pl, malloc(sizeof(double) * (size_t)(n ? n : 1)));
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
    mc_case mc;
    char err[512];
    mc_pool pl = {{0}, 0};
    if (mc_read(path, &mc, err, sizeof err) != 0) {
        check(0, path, err);
        mc_free(&mc);
        return -1;
    }
    const golden_case *c = &mc.c;
    const char *name = c->name;
    const rm_request *r = &mc.r;
    int64_t n_out = mc.n_out, n_w = mc.n_w;
    double *out = mc_pool_take(&pl, malloc(sizeof(double) * (size_t)n_out));
    double *w = mc_pool_take(&pl, malloc(sizeof(double) * (size_t)n_w));
    int64_t b = r->sparsity.block ? r->sparsity.block : 1;
    int64_t n_lay = ((r->Lq + b - 1) / b) * ((r->Lk + b - 1) / b);
    uint8_t *lay = mc_pool_take(&pl, calloc((size_t)n_lay, 1));
    rm_margin m;
    if (!out || !w || !lay || rm_compute(r, out, w, lay, &m) != 0) {
        check(0, name, "rm_compute failed (missing parameter or out of memory)");
        mc_pool_free(&pl);
        mc_free(&mc);
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
    if (golden_opt(c, "seed") && (golden_get(c, GOLDEN_EXPECT, "W_o.weight") ||
                                  golden_get(c, GOLDEN_EXPECT, "in_proj_weight")))
        check_seeded(c, name);
    mc_pool_free(&pl);
    mc_free(&mc);
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
    char **paths;
    int n = mc_list(argc > 1 ? argv[1] : NULL, &paths);
    if (n == 0)
        return 1;
    self_checks();
    for (int i = 0; i < n; i++)
        run_case(paths[i]);
    golden_list_free(paths, n);
    printf("test_modern_ref: %d case files\n", n);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
