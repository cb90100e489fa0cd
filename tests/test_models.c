/* test_models.c - the C models against PyTorch: tokenizer, greedy/beam-4 tokens, attention, weight checks, HTTP. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mdl.h"

static int n_pass, n_fail;
static const char *names[4] = {"concat", "additive", "general", "transformer"};
static char weights_dir[1024], ref_dir[1024], out_dir[1024];
static char model_dir[4][1024], model_ref[4][1024]; /* per model (manifest) */
static int model_trained[4];
static int attn_sentences = 0, max_sentences = 2000;
static int trained; /* the shipped weights (else random ones: ties are more frequent, 2 allowed) */
static mdl_tok *tok;
static attn_ctx *ctx; /* one thread, reused by every decode of the main thread */

static int check(int ok, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int check(int ok, const char *what, const char *fmt, ...)
{
    if (ok) {
        n_pass++;
        return 1;
    }
    n_fail++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", what);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return b;
}

static int write_all(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Space-separated ints into ids (at most cap); returns the count. */
static int parse_ids(const char *s, int32_t *ids, int cap)
{
    int n = 0;
    char *end;
    while (*s && n < cap) {
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        ids[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

/* ------------------------------------------------------------ tokenizer */

static void test_tokenizer(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenize.tsv", out_dir);
    char *all = read_all(path, NULL);
    if (!check(all != NULL, "tokenizer", "cannot read %s (run tests/models_ref.py prepare)", path))
        return;
    int n = 0, bad = 0;
    int32_t want[4200], got[4200];
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2)
            continue;
        *t1 = *t2 = '\0';
        int nw = parse_ids(t1 + 1, want, 4200);
        int64_t ng = mdl_tok_encode(tok, line, strlen(line), got, 4200);
        char *dec = mdl_tok_decode(tok, want, nw);
        int ok = ng == nw && !memcmp(got, want, sizeof(int32_t) * (size_t)nw) && dec && !strcmp(dec, t2 + 1);
        if (!ok && bad++ < 5)
            printf("tokenizer: \"%s\": C %lld ids, Python %d; decode \"%s\" vs \"%s\"\n", line, (long long)ng,
                   nw, dec ? dec : "(null)", t2 + 1);
        free(dec);
        n++;
    }
    check(n > 4000 && bad == 0, "tokenizer", "%d of %d texts differ", bad, n);
    printf("tokenizer: C and Python identical on %d texts (the test split's English and French, and %s)\n",
           n - bad, "12 odd ones");
    /* invalid UTF-8 and oversize text are refused */
    check(mdl_tok_encode(tok, "a\xff" "b", 3, got, 10) == -1, "tokenizer invalid utf-8", "accepted");
    check(mdl_tok_encode(tok, "\xed\xa0\x80", 3, got, 10) == -1, "tokenizer surrogate", "accepted");
    check(mdl_tok_encode(tok, "\xc0\xaf", 2, got, 10) == -1, "tokenizer overlong", "accepted");
    check(mdl_tok_encode(tok, "", 0, got, 10) == 0, "tokenizer empty", "not 0 ids");
    check(mdl_tok_encode(tok, "   ", 3, got, 10) == 0, "tokenizer spaces", "not 0 ids");
    free(all);
}

/* ------------------------------------------------------------ C against PyTorch */

typedef struct {
    int n;
    char **en; /* the test split's English */
} test_split;

static test_split split;

static void read_split(void)
{
    char *all = read_all("training/data/test.tsv", NULL);
    if (!all)
        return;
    split.en = calloc(4096, sizeof *split.en);
    for (char *line = strtok(all, "\n"); line && split.n < 4096; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (tab)
            *tab = '\0';
        split.en[split.n++] = strdup(line);
    }
    free(all);
}

#define RECOMPUTE_SENTENCES 50

typedef struct {
    int sentences, greedy_same, beam_same, attn_checked, ties, real, re_same, re_n, text_n, text_same;
    int near; /* beam decodes whose closest call was within TIE_GAP, same answer or not */
    double max_diff, ms_greedy, ms_beam;
} model_stats;

/* Largest |a - b| over n floats read from f; -1 when the file ends early. */
static double attn_diff(FILE *f, const float *got, int64_t n)
{
    double mx = 0;
    float buf[1024];
    for (int64_t i = 0; i < n;) {
        size_t k = (size_t)(n - i < 1024 ? n - i : 1024);
        if (fread(buf, sizeof(float), k, f) != k)
            return -1;
        for (size_t j = 0; j < k; j++, i++) {
            double d = got ? fabs((double)got[i] - buf[j]) : 0;
            mx = d > mx ? d : mx;
        }
    }
    return mx;
}

/* C's teacher-forced log-probabilities of ids (n of them) into lp; returns their sum. */
static double forced(const mdl_model *m, const int32_t *src, int ns, const int32_t *ids, int n, float *lp)
{
    mdl_opts o = {.beam = 1, .force = ids, .n_force = n};
    mdl_result r;
    char err[MDL_ERR_LEN];
    double sum = 0;
    if (!check(mdl_translate(m, ctx, src, ns, &o, &r, err, sizeof err) == 0, "forced", "%s", err))
        return 0;
    for (int i = 0; i < n; i++)
        sum += lp[i] = r.logp[i];
    mdl_result_free(&r);
    return sum;
}

/* Beam candidates this close may be ranked either way by float rounding. */
#define TIE_GAP 1e-5f

/* Whether C's answer `got` and PyTorch's `want` differ by a float tie: at
 * the first differing id, the two prefixes' log-probabilities (greedy: of
 * that id; beam: summed) are within 1e-4 (greedy) / 1e-3 (beam sums), or
 * the two answers' length-normalised scores are within 1e-4, or (beam)
 * C's search ranked two candidates within TIE_GAP of each other at some
 * step (closest), where PyTorch's rounding may have put them the other
 * way and kept another hypothesis. */
static int is_tie(const mdl_model *m, const int32_t *src, int ns, const int32_t *got, int ng,
                  const int32_t *want, int nw, int beam, float closest)
{
    if (beam && closest <= TIE_GAP)
        return 1;
    float lg[600], lw[600];
    double sg = forced(m, src, ns, got, ng, lg), sw = forced(m, src, ns, want, nw, lw);
    int p = 0;
    while (p < ng && p < nw && got[p] == want[p])
        p++;
    if (p >= ng || p >= nw)
        return 0;
    if (!beam)
        return fabs((double)lg[p] - lw[p]) <= 1e-4;
    double pg = 0, pw = 0;
    for (int i = 0; i <= p; i++) {
        pg += lg[i];
        pw += lw[i];
    }
    return fabs(pg - pw) <= 1e-3 || fabs(sg / ng - sw / nw) <= 1e-4;
}

/* Compares one decode against its reference ids and, when f, attention. */
static int compare_one(const mdl_model *m, const int32_t *src, int ns, const int32_t *want, int nw, int beam,
                       FILE *f, model_stats *st, int idx, int recompute)
{
    mdl_opts o = {.beam = beam, .want_attention = f != NULL, .recompute = recompute};
    mdl_result r;
    char err[MDL_ERR_LEN];
    double t0 = now_ms();
    if (!check(mdl_translate(m, ctx, src, ns, &o, &r, err, sizeof err) == 0, "translate", "%s", err))
        return 0;
    *(beam > 1 ? &st->ms_beam : &st->ms_greedy) += now_ms() - t0;
    int same = r.n_out == nw && !memcmp(r.out, want, sizeof(int32_t) * (size_t)nw);
    st->near += beam > 1 && r.closest <= TIE_GAP;
    if (!same) {
        int tie = is_tie(m, src, ns, r.out, r.n_out, want, nw, beam > 1, r.closest);
        st->ties += tie;
        st->real += !tie;
        printf("%s: sentence %d %s: C's %d ids differ from PyTorch's %d: %s\n", mdl_model_info(m)->name, idx,
               beam > 1 ? "beam-4" : "greedy", r.n_out, nw, tie ? "a float tie" : "NOT a tie");
    }
    if (f) {
        const mdl_info *in = mdl_model_info(m);
        int64_t T = nw, n = ns, LH = (int64_t)in->dec_layers * in->heads;
        const float *parts[3] = {r.enc, r.dec, r.cross};
        int64_t sizes[3] = {(int64_t)in->enc_layers * in->heads * n * n, LH * T * T, LH * T * n};
        for (int p = in->kind == MDL_KIND_TRANSFORMER ? 0 : 2; p < 3; p++) {
            double d = attn_diff(f, same ? parts[p] : NULL, sizes[p]);
            check(d >= 0, "attention file", "ends early");
            if (same && d > st->max_diff)
                st->max_diff = d;
        }
        st->attn_checked += same;
    }
    mdl_result_free(&r);
    return same;
}

/* Line i of a file read whole (lines split in place), or NULL. */
static char **read_lines(const char *path, int *n)
{
    char *all = read_all(path, NULL);
    *n = 0;
    if (!all)
        return NULL;
    char **l = calloc(4096, sizeof *l);
    for (char *p = all; *p && *n < 4096;) {
        l[(*n)++] = p;
        char *e = strchr(p, '\n');
        if (!e)
            break;
        *e = '\0';
        p = e + 1;
    }
    return l;
}

/* Sentences past the id reference: the C translation's text against
 * training/outputs/test.NAME.{greedy,beam4}.txt (evaluate.py, translate.py on
 * the shipped weights). */
static void test_outputs(const mdl_model *m, const char *name, model_stats *st)
{
    char path[1200];
    int ng, nb;
    snprintf(path, sizeof path, "training/outputs/test.%s.greedy.txt", name);
    char **g = read_lines(path, &ng);
    snprintf(path, sizeof path, "training/outputs/test.%s.beam4.txt", name);
    char **b = read_lines(path, &nb);
    if (ng < split.n) /* a file of another run (evaluate.py writes all lines at once) */
        ng = 0;
    if (nb < split.n)
        nb = 0;
    for (int i = st->sentences; (ng || nb) && i < max_sentences && i < split.n; i++) {
        int32_t ids[600];
        int maxs = mdl_model_info(m)->max_src;
        int64_t k = mdl_tok_encode(tok, split.en[i], strlen(split.en[i]), ids, 599);
        k = k > maxs - 1 ? maxs - 1 : k;
        ids[k] = MDL_EOS;
        for (int beam = 1; beam <= 4; beam += 3) {
            if (!(beam == 1 ? ng : nb))
                continue;
            mdl_opts o = {.beam = beam};
            mdl_result r;
            char err[MDL_ERR_LEN];
            if (!check(mdl_translate(m, ctx, ids, (int)k + 1, &o, &r, err, sizeof err) == 0, "translate", "%s", err))
                continue;
            char *t = mdl_tok_decode(tok, r.out, r.n_out);
            int same = t && !strcmp(t, beam == 1 ? g[i] : b[i]);
            st->text_same += same;
            st->text_n++;
            if (!same)
                printf("%s: sentence %d %s: C \"%s\", evaluate.py \"%s\"\n", name, i, beam == 1 ? "greedy" : "beam-4",
                       t ? t : "", beam == 1 ? g[i] : b[i]);
            free(t);
            mdl_result_free(&r);
        }
    }
    if (st->text_n)
        printf("%s: sentences %d-%d: C's text identical to training/outputs (evaluate.py; %s) in %d of %d decodes\n",
               name, st->sentences, max_sentences < split.n ? max_sentences - 1 : split.n - 1,
               ng && nb ? "greedy and beam-4" : ng ? "greedy only" : "beam-4 only", st->text_same, st->text_n);
    check(st->text_n == 0 || (st->text_n - st->text_same) * 200 < st->text_n, name,
          "%d of %d texts differ from training/outputs", st->text_n - st->text_same, st->text_n);
    if (g)
        free(g[0]);
    if (b)
        free(b[0]);
    free(g);
    free(b);
}

static attn_status stop_with(void *arg) { return *(const attn_status *)arg; }

/* A translation whose context says stop (its interrupt returning
 * ATTN_ERR_TIMEOUT, then ATTN_ERR_CANCELLED) fails with that status, for
 * the server to answer 504 or log 499; with the interrupt gone the same
 * translation succeeds. Greedy and beam 4. */
static void test_stopped(const mdl_model *m, const char *name)
{
    static const int32_t src[] = {5, 6, 7, MDL_EOS};
    static const attn_status why[] = {ATTN_ERR_TIMEOUT, ATTN_ERR_CANCELLED};
    char err[MDL_ERR_LEN];
    mdl_result r;
    for (int beam = 1; beam <= 4; beam += 3)
        for (int i = 0; i < 2; i++) {
            mdl_opts o = {.beam = beam, .want_attention = 1};
            attn_ctx_set_interrupt(ctx, stop_with, (void *)&why[i]);
            int rc = mdl_translate(m, ctx, src, 4, &o, &r, err, sizeof err);
            check(rc == (int)why[i] && strstr(err, attn_status_str(why[i])), "a stopped translation",
                  "%s, beam %d: returned %d for status %d (%s)", name, beam, rc, why[i], err);
            attn_ctx_set_interrupt(ctx, NULL, NULL);
            rc = mdl_translate(m, ctx, src, 4, &o, &r, err, sizeof err);
            if (check(rc == 0 && r.n_out > 0, "the translation after a stopped one", "%s: %d (%s)", name, rc, err))
                mdl_result_free(&r);
        }
}

static void test_model(int mi, model_stats *st)
{
    const char *name = names[mi];
    char path[1200], err[MDL_ERR_LEN];
    memset(st, 0, sizeof *st);
    snprintf(weights_dir, sizeof weights_dir, "%s", model_dir[mi]);
    snprintf(ref_dir, sizeof ref_dir, "%s", model_ref[mi]);
    trained = model_trained[mi];
    printf("%s: %s weights (%s), reference %s\n", name, trained ? "trained" : "random-init", weights_dir, ref_dir);
    mdl_model *m = mdl_load(weights_dir, name, tok, err, sizeof err);
    if (!check(m != NULL, "load", "%s", err))
        return;
    test_stopped(m, name);
    snprintf(path, sizeof path, "%s/%s.tsv", ref_dir, name);
    char *all = read_all(path, NULL);
    snprintf(path, sizeof path, "%s/%s.attn", out_dir, name);
    FILE *fa = fopen(path, "rb");
    if (check(all && fa, "reference", "cannot read %s/%s.tsv or %s", ref_dir, name, path)) {
        int32_t src[600], g[600], b[600], cs[600];
        char *save = NULL;
        strtok_r(all, "\n", &save); /* sha256 line */
        for (char *line = strtok_r(NULL, "\n", &save); line && st->sentences < max_sentences;
             line = strtok_r(NULL, "\n", &save)) {
            char *f1 = strchr(line, '\t'), *f2 = f1 ? strchr(f1 + 1, '\t') : NULL, *f3 = f2 ? strchr(f2 + 1, '\t') : NULL;
            if (!check(f3 != NULL, "reference", "bad line in %s.tsv", name))
                break;
            *f1 = *f2 = *f3 = '\0';
            int idx = atoi(line);
            int ns = parse_ids(f1 + 1, src, 600), ng = parse_ids(f2 + 1, g, 600), nb = parse_ids(f3 + 1, b, 600);
            if (idx < split.n) { /* the C tokenizer gives the same source (cut to max_src - 1 + <eos>) */
                int64_t k = mdl_tok_encode(tok, split.en[idx], strlen(split.en[idx]), cs, 599);
                int maxs = mdl_model_info(m)->max_src;
                k = k > maxs - 1 ? maxs - 1 : k;
                cs[k] = MDL_EOS;
                check(k + 1 == ns && !memcmp(cs, src, sizeof(int32_t) * (size_t)ns), "source ids",
                      "%s sentence %d", name, idx);
            }
            FILE *f = st->sentences < attn_sentences ? fa : NULL;
            long at = f ? ftell(f) : 0;
            st->greedy_same += compare_one(m, src, ns, g, ng, 1, f, st, idx, 0);
            st->beam_same += compare_one(m, src, ns, b, nb, 4, f, st, idx, 0);
            if (f && mdl_model_info(m)->kind == MDL_KIND_TRANSFORMER && st->sentences < RECOMPUTE_SENTENCES) {
                /* the decoder without KV cache (attn_mha_compute with residual_norm) on the same attention */
                fseek(f, at, SEEK_SET);
                st->re_same += compare_one(m, src, ns, g, ng, 1, f, st, idx, 1);
                st->re_same += compare_one(m, src, ns, b, nb, 4, f, st, idx, 1);
                st->re_n += 2;
            }
            st->sentences++;
        }
    }
    if (fa)
        fclose(fa);
    free(all);
    if (trained)
        test_outputs(m, name, st);
    mdl_free(m);
    int diff = 2 * st->sentences - st->greedy_same - st->beam_same;
    check(st->sentences > 0 && (diff * 200 < 2 * st->sentences || (!trained && diff <= 2)), name,
          "%d of %d decodes differ from PyTorch (at most 0.5%% may, as float ties)", diff, 2 * st->sentences);
    check(st->real == 0, name, "%d decodes differ from PyTorch by more than a float tie", st->real);
    check(st->max_diff <= 1e-4, name, "attention differs from PyTorch by %.3g", st->max_diff);
    check(st->re_same == st->re_n, name, "without the KV cache %d of %d decodes differ", st->re_n - st->re_same, st->re_n);
    if (st->re_n)
        printf("%s: decoder without KV cache (attn_mha_compute, residual_norm): %d of %d decodes identical, "
               "attention within the max below\n", name, st->re_same, st->re_n);
    printf("%s: %d sentences: greedy identical %d, beam-4 identical %d (differ %d: float ties %d; "
           "beam-4 closest call within %g in %d); attention of %d decodes "
           "max |C - PyTorch| %.2e; C %.2f ms greedy, %.2f ms beam-4 per sentence\n",
           name, st->sentences, st->greedy_same, st->beam_same, diff, st->ties, (double)TIE_GAP, st->near,
           st->attn_checked, st->max_diff,
           st->ms_greedy / (st->sentences ? st->sentences : 1), st->ms_beam / (st->sentences ? st->sentences : 1));
}

/* ------------------------------------------------------------ weight files */

static char bad_dir[1100];

/* Copies weights_dir/NAME.{json,safetensors} to bad_dir as NAME2, letting
 * edit() change the header JSON (may be NULL) and poke() the bytes. */
static int make_bad(const char *name, const char *name2, void (*edit)(json_t *), size_t cut,
                    void (*poke)(unsigned char *, size_t, json_t *, size_t), void (*cfg)(json_t *))
{
    char path[1300];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.safetensors", weights_dir, name);
    unsigned char *b = (unsigned char *)read_all(path, &len);
    if (!b)
        return -1;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    json_t *h = json_loadb((const char *)b + 8, hl, 0, NULL);
    if (edit)
        edit(h);
    char *hs = json_dumps(h, JSON_COMPACT);
    size_t hn = strlen(hs), pad = (8 - hn % 8) % 8, dl = len - 8 - hl;
    size_t total = 8 + hn + pad + dl;
    unsigned char *o = malloc(total);
    for (int i = 0; i < 8; i++)
        o[i] = (unsigned char)((hn + pad) >> (8 * i));
    memcpy(o + 8, hs, hn);
    memset(o + 8 + hn, ' ', pad);
    memcpy(o + 8 + hn + pad, b + 8 + hl, dl);
    if (poke)
        poke(o, total, h, 8 + hn + pad);
    snprintf(path, sizeof path, "%s/%s.safetensors", bad_dir, name2);
    int rc = write_all(path, o, cut ? cut : total);
    snprintf(path, sizeof path, "%s/%s.json", weights_dir, name);
    json_t *c = json_load_file(path, 0, NULL);
    if (cfg)
        cfg(c);
    snprintf(path, sizeof path, "%s/%s.json", bad_dir, name2);
    rc |= json_dump_file(c, path, 0);
    json_decref(c);
    json_decref(h);
    free(hs);
    free(o);
    free(b);
    return rc;
}

static void ed_rename(json_t *h)
{
    json_t *v = json_object_get(h, "decoder.attention.attn.weight");
    json_object_set(h, "decoder.attention.attn.weigth", v);
    json_object_del(h, "decoder.attention.attn.weight");
}

static void ed_shape(json_t *h)
{ /* a consistent header whose shape is not the model's: (128, 128) -> (64, 256) */
    json_t *v = json_object_get(json_object_get(h, "decoder.combine.bias"), "shape");
    json_array_set_new(v, 0, json_integer(64));
    json_array_append_new(v, json_integer(2));
}

static void ed_overlap(json_t *h)
{
    json_t *a = json_object_get(json_object_get(h, "decoder.gru.bias_hh"), "data_offsets");
    json_t *b = json_object_get(json_object_get(h, "decoder.gru.bias_ih"), "data_offsets");
    json_array_set(b, 0, json_array_get(a, 0));
    json_array_set(b, 1, json_array_get(a, 1));
}

static void ed_dtype(json_t *h)
{
    json_object_set_new(json_object_get(h, "encoder.bias_hh_l0"), "dtype", json_string("F16"));
}

static void ed_meta(json_t *h)
{
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "model", "concat"));
}

static void ed_nometa(json_t *h) { json_object_del(h, "__metadata__"); }

static void pk_nan(unsigned char *o, size_t n, json_t *h, size_t data0)
{
    json_t *off = json_object_get(json_object_get(h, "decoder.gru.bias_hh"), "data_offsets");
    size_t at = data0 + (size_t)json_integer_value(json_array_get(off, 0)) + 8;
    static const unsigned char nan[4] = {0, 0, 0xc0, 0x7f};
    if (at + 4 <= n)
        memcpy(o + at, nan, 4);
}

static void pk_json(unsigned char *o, size_t n, json_t *h, size_t data0)
{
    (void)n; (void)h; (void)data0;
    o[8] = '#';
}

static void pk_hlen(unsigned char *o, size_t n, json_t *h, size_t data0)
{
    (void)h; (void)data0; (void)n;
    o[5] = 0x7f; /* a header length beyond the file */
}

static void cf_emb(json_t *c)
{
    json_object_set_new(c, "emb", json_integer(64));
    json_object_set_new(c, "hidden", json_integer(64));
}

static void cf_vocab(json_t *c) { json_object_set_new(c, "vocab_size", json_integer(3000)); }

/* Each bad file must fail to load with a message containing `want` (and `want2`). */
static void bad_case(const char *label, void (*edit)(json_t *), double cut_frac,
                     void (*poke)(unsigned char *, size_t, json_t *, size_t), void (*cfg)(json_t *),
                     const char *want, const char *want2)
{
    char path[1300], err[MDL_ERR_LEN] = "";
    size_t len = 0, cut = 0;
    snprintf(path, sizeof path, "%s/general.safetensors", weights_dir);
    free(read_all(path, &len));
    if (cut_frac > 0)
        cut = (size_t)(len * cut_frac);
    if (!check(make_bad("general", "general", edit, cut, poke, cfg) == 0, label, "cannot write the bad file"))
        return;
    mdl_model *m = mdl_load(bad_dir, "general", tok, err, sizeof err);
    check(m == NULL && strstr(err, want) && (!want2 || strstr(err, want2)), label,
          "loaded=%d, error \"%s\" (wanted \"%s\"%s%s)", m != NULL, err, want, want2 ? " and " : "", want2 ? want2 : "");
    if (!m)
        printf("weights %-16s -> %s\n", label, err);
    mdl_free(m);
}

static void test_weight_files(void)
{
    snprintf(bad_dir, sizeof bad_dir, "%s/bad", out_dir);
    mkdir(bad_dir, 0755);
    bad_case("truncated", NULL, 0.7, NULL, NULL, "truncated", "tensor \"");
    bad_case("truncated-header", NULL, 0.0001, NULL, NULL, "does not fit", NULL);
    bad_case("header-length", NULL, 0, pk_hlen, NULL, "header length", NULL);
    bad_case("header-json", NULL, 0, pk_json, NULL, "not a JSON object", NULL);
    bad_case("nan", NULL, 0, pk_nan, NULL, "\"decoder.gru.bias_hh\"", "not finite");
    bad_case("missing-tensor", ed_rename, 0, NULL, NULL, "\"decoder.attention.attn.weight\" is missing", NULL);
    bad_case("wrong-shape", ed_shape, 0, NULL, NULL, "\"decoder.combine.bias\" has shape (64, 2)", NULL);
    bad_case("overlap", ed_overlap, 0, NULL, NULL, "overlaps", "decoder.gru.bias_");
    bad_case("dtype", ed_dtype, 0, NULL, NULL, "\"encoder.bias_hh_l0\": dtype F16", NULL);
    bad_case("other-model", ed_meta, 0, NULL, NULL, "says model \"concat\"", NULL);
    bad_case("config-sizes", NULL, 0, NULL, cf_emb, "\"embedding.weight\" has shape (3600, 128)", NULL);
    bad_case("config-vocab", NULL, 0, NULL, cf_vocab, "vocab_size 3000", NULL);
    /* a weights file of another model under this name (no metadata check hit first) */
    char path[1300], err[MDL_ERR_LEN] = "";
    make_bad("concat", "general", ed_nometa, 0, NULL, NULL);
    snprintf(path, sizeof path, "%s/general.json", weights_dir);
    char *cfgs = read_all(path, NULL);
    snprintf(path, sizeof path, "%s/general.json", bad_dir);
    write_all(path, cfgs, strlen(cfgs));
    free(cfgs);
    mdl_model *m = mdl_load(bad_dir, "general", tok, err, sizeof err);
    check(m == NULL && strstr(err, "tensor \""), "mismatched file", "loaded=%d: %s", m != NULL, err);
    printf("weights %-16s -> %s\n", "concat-as-general", err);
    mdl_free(m);
    /* random bytes and every truncation length of a small prefix never crash */
    snprintf(path, sizeof path, "%s/general.safetensors", weights_dir);
    size_t len;
    unsigned char *b = (unsigned char *)read_all(path, &len);
    int crashed = 0;
    uint64_t st = 12345;
    for (int i = 0; b && i < 300; i++) {
        mdl_st_file f;
        size_t n = i < 150 ? (size_t)i * 37 % 4096 : len;
        unsigned char *c = malloc(n + 1);
        memcpy(c, b, n);
        for (int k = 0; i >= 150 && k < 8; k++) { /* flip bytes in the header */
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            c[8 + (st >> 33) % 2000] ^= (unsigned char)(st >> 20);
        }
        if (mdl_st_parse("fuzz", c, n, &f, err, sizeof err) == 0)
            mdl_st_free(&f);
        free(c);
    }
    check(!crashed, "fuzzed weights", "crashed");
    free(b);
}

/* ------------------------------------------------------------ HTTP */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static const char *server_path, *log_path = "build/test_models_server.log";

typedef struct {
    char *data;
    size_t len;
} rbuf;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    rbuf *b = ud;
    char *d = realloc(b->data, b->len + size * n + 1);
    if (!d)
        return 0;
    memcpy(d + b->len, p, size * n);
    b->data = d;
    b->len += size * n;
    d[b->len] = '\0';
    return size * n;
}

/* method GET or POST (body != NULL); returns the status, *out the parsed body (or NULL). */
static long http(const char *base, const char *path, const char *body, json_t **out)
{
    char url[300];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *h = curl_easy_init();
    rbuf b = {0};
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long st = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    if (out)
        *out = b.data ? json_loads(b.data, 0, NULL) : NULL;
    free(b.data);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return st;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &al))
        return 0;
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts the server on the models of dir (strict: ATTN_MODELS_STRICT=1);
 * waits for /healthz. Returns the pid, 0 when it exited (status in *st). */
static pid_t server_start(const char *dir, int strict, char *base, int *st)
{
    int port = free_port();
    snprintf(base, 64, "http://127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        char p[16];
        snprintf(p, sizeof p, "%d", port);
        setenv("ATTN_PORT", p, 1);
        setenv("ATTN_BIND", "127.0.0.1", 1);
        setenv("ATTN_LOG_LEVEL", "warn", 1);
        setenv("ATTN_MODELS_DIR", dir, 1);
        setenv("ATTN_MODELS_STRICT", strict ? "1" : "0", 1);
        FILE *lf = fopen(log_path, "a");
        if (lf) {
            dup2(fileno(lf), 1);
            dup2(fileno(lf), 2);
        }
        execl(server_path, server_path, (char *)NULL);
        _exit(127);
    }
    double t0 = now_ms();
    while (now_ms() - t0 < 20000) {
        if (waitpid(pid, st, WNOHANG) == pid)
            return 0;
        if (http(base, "/healthz", NULL, NULL) == 200)
            return pid;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, st, 0);
    return 0;
}

static void server_stop(pid_t pid)
{
    int st;
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server stop", "exit status %d", st);
}

/* The status and error code of a POST. */
static void expect_error(const char *base, const char *path, const char *body, long status, const char *code,
                         const char *field)
{
    json_t *j = NULL;
    long st = http(base, path, body, &j);
    json_t *e = json_object_get(j, "error");
    const char *c = json_string_value(json_object_get(e, "code")), *f = json_string_value(json_object_get(e, "field"));
    check(st == status && c && !strcmp(c, code) && (!field || (f && !strcmp(f, field))) &&
              json_is_string(json_object_get(e, "message")), "http error",
          "%s %.80s: got %ld %s (field %s), wanted %ld %s", path, body ? body : "GET", st, c ? c : "-", f ? f : "-",
          status, code);
    json_decref(j);
}

/* A nested JSON array of floats against data with the given shape; returns max |diff| or -1 on a shape mismatch. */
static double nested_diff(json_t *j, const float *d, int rank, const int64_t *shape, int64_t *k)
{
    if (rank == 0) {
        if (!json_is_number(j))
            return -1;
        return fabs((double)(float)json_number_value(j) - d[(*k)++]); /* %.9g: the float's exact round trip */
    }
    if (!json_is_array(j) || (int64_t)json_array_size(j) != shape[0])
        return -1;
    double mx = 0;
    for (size_t i = 0; i < json_array_size(j); i++) {
        double x = nested_diff(json_array_get(j, i), d, rank - 1, shape + 1, k);
        if (x < 0)
            return -1;
        mx = x > mx ? x : mx;
    }
    return mx;
}

/* The server's answer for text against the library's own result. */
static _Atomic int overloaded_retries; /* 503 answers retried by translate_matches */

static int translate_matches(const char *base, const mdl_model *m, const char *text, int beam, int max_len, int quiet)
{
    const mdl_info *in = mdl_model_info(m);
    int32_t ids[600];
    int64_t n = mdl_tok_encode(tok, text, strlen(text), ids, 599);
    ids[n] = MDL_EOS;
    mdl_opts o = {.beam = beam, .max_len = max_len, .want_attention = 1};
    mdl_result r;
    char err[MDL_ERR_LEN], path[96], *body;
    if (mdl_translate(m, NULL, ids, (int)n + 1, &o, &r, err, sizeof err) != 0)
        return 0;
    json_t *req = json_pack("{s:s,s:i}", "text", text, "beam", beam);
    if (max_len)
        json_object_set_new(req, "max_len", json_integer(max_len));
    body = json_dumps(req, JSON_COMPACT);
    snprintf(path, sizeof path, "/models/%s/translate", in->name);
    json_t *j = NULL;
    long st;
    /* a translation counts against the server's cap on computations at
     * once: past it the answer is 503 overloaded, which a client retries */
    for (int t = 0; (st = http(base, path, body, &j)) == 503 && t < 500; t++) {
        json_decref(j);
        j = NULL;
        overloaded_retries++;
        usleep(10000);
    }
    char *want = mdl_tok_decode(tok, r.out, r.n_out);
    const char *got = json_string_value(json_object_get(j, "translation"));
    json_t *tt = json_object_get(j, "target_tokens"), *ss = json_object_get(j, "source_tokens");
    int ok = st == 200 && got && !strcmp(got, want) && (int)json_array_size(tt) == r.n_out &&
             (int)json_array_size(ss) == r.n_src;
    for (int i = 0; ok && i < r.n_out; i++)
        ok = !strcmp(json_string_value(json_array_get(tt, i)), mdl_tok_str(tok, r.out[i]));
    for (int i = 0; ok && i < r.n_src; i++)
        ok = !strcmp(json_string_value(json_array_get(ss, i)), mdl_tok_str(tok, r.src[i]));
    json_t *a = json_object_get(j, "attention");
    int64_t k = 0, L = in->dec_layers, H = in->heads, T = r.n_out, S = r.n_src;
    if (ok && in->kind == MDL_KIND_TRANSFORMER) {
        int64_t cs[4] = {L, H, T, S}, ds[4] = {L, H, T, T}, es[4] = {in->enc_layers, H, S, S};
        ok = nested_diff(json_object_get(a, "cross"), r.cross, 4, cs, &k) == 0;
        k = 0;
        ok = ok && nested_diff(json_object_get(a, "decoder"), r.dec, 4, ds, &k) == 0;
        k = 0;
        ok = ok && nested_diff(json_object_get(a, "encoder"), r.enc, 4, es, &k) == 0;
    } else if (ok) {
        int64_t cs[2] = {T, S};
        ok = nested_diff(json_object_get(a, "cross"), r.cross, 2, cs, &k) == 0 && json_object_size(a) == 1;
    }
    if (!quiet)
        check(ok, "http translate", "%s beam %d \"%s\": status %ld, \"%s\" vs the library's \"%s\"", in->name, beam,
              text, st, got ? got : "-", want);
    free(want);
    free(body);
    json_decref(req);
    json_decref(j);
    mdl_result_free(&r);
    return ok;
}

typedef struct {
    const char *base;
    mdl_model **models;
    int id, bad;
} worker;

static void *worker_run(void *p)
{
    worker *w = p;
    for (int i = 0; i < 6; i++) {
        int s = (w->id * 7 + i * 13) % (split.n > 0 ? split.n : 1);
        const char *text = split.n ? split.en[s] : "Open the file";
        w->bad += !translate_matches(w->base, w->models[(w->id + i) % 4], text, 1 + (i % 2) * 3, 0, 1);
    }
    return NULL;
}

/* A /models entry's alignment: shares in [0, 1], a mean peak weight in
 * (0, 1]; for the Transformer one
 * score per decoder layer and head (sizes), and best_head the first head with
 * the highest score, whose score is the entry's accuracy. */
static void check_alignment(const char *nm, json_t *e)
{
    json_t *a = json_object_get(e, "alignment");
    double acc = json_number_value(json_object_get(a, "accuracy"));
    double chance = json_number_value(json_object_get(a, "chance"));
    double peak = json_number_value(json_object_get(a, "mean_peak_weight"));
    if (!check(json_is_object(a) && acc >= 0 && acc <= 1 && chance > 0 && chance <= 1 && peak > 0 && peak <= 1,
               "GET /models alignment", "%s: no alignment shares in [0, 1] or mean peak weight in (0, 1]", nm))
        return;
    json_t *grid = json_object_get(a, "per_layer_head"), *best = json_object_get(a, "best_head");
    if (strcmp(nm, "transformer")) {
        check(json_is_null(grid) && json_is_null(best), "GET /models alignment", "%s: heads of a GRU", nm);
        return;
    }
    json_t *sizes = json_object_get(e, "sizes");
    size_t layers = (size_t)json_integer_value(json_object_get(sizes, "dec_layers"));
    size_t heads = (size_t)json_integer_value(json_object_get(sizes, "heads"));
    int ok = json_array_size(grid) == layers && layers > 0;
    size_t bl = 0, bh = 0;
    double top = -1;
    for (size_t l = 0; ok && l < layers; l++) {
        json_t *row = json_array_get(grid, l);
        ok = json_array_size(row) == heads;
        for (size_t h = 0; ok && h < heads; h++) {
            double v = json_number_value(json_array_get(row, h));
            if (v > top) {
                top = v;
                bl = l;
                bh = h;
            }
        }
    }
    check(ok && json_integer_value(json_object_get(best, "layer")) == (json_int_t)bl &&
              json_integer_value(json_object_get(best, "head")) == (json_int_t)bh && top == acc,
          "GET /models alignment", "transformer: best_head is not the best of per_layer_head (%zu x %zu)", layers,
          heads);
}

/* A /models entry's trained_on: every figure covers all the runs that led
 * to the weights. With the shipped weights, train_seconds is results.json's
 * (evaluate.py copies NAME.json's train_seconds_total, the sum of the runs'
 * times in the logs); `make test-models` recomputes the runs, steps and
 * epochs from training/logs (training/totals.py --check). */
static void check_trained_on(const char *nm, json_t *e, json_t *results)
{
    json_t *t = json_object_get(e, "trained_on");
    json_t *runs = json_object_get(t, "runs"), *secs = json_object_get(t, "train_seconds");
    json_t *steps = json_object_get(t, "train_steps"), *epochs = json_object_get(t, "train_epochs");
    if (!check(json_is_object(t) && json_is_integer(runs) && json_integer_value(runs) >= 1 &&
                   json_is_integer(steps) && (json_is_null(epochs) || json_is_number(epochs)) &&
                   (json_is_null(secs) || json_is_number(secs)),
               "GET /models trained_on", "%s: runs, train_steps, train_epochs or train_seconds missing", nm))
        return;
    if (!results)
        return;
    json_t *r = json_object_get(json_object_get(json_object_get(results, "test"), nm), "train_seconds");
    check(json_is_integer(json_object_get(t, "best_step")) && json_integer_value(steps) > 0 &&
              json_number_value(epochs) > 0 && json_is_number(r) &&
              fabs(json_number_value(secs) - json_number_value(r)) < 0.05,
          "GET /models trained_on", "%s: train_seconds %g, results.json %g (runs %lld, steps %lld, epochs %g)", nm,
          json_number_value(secs), json_number_value(r), (long long)json_integer_value(runs),
          (long long)json_integer_value(steps), json_number_value(epochs));
}

static void test_http_models(mdl_model **models)
{
    char base[64];
    int st = 0;
    pid_t pid = server_start(weights_dir, 1, base, &st);
    if (!check(pid > 0, "server start", "the server did not start on %s (see %s)", weights_dir, log_path))
        return;
    json_t *j = NULL, *results = NULL;
    if (model_trained[0] && model_trained[1] && model_trained[2] && model_trained[3]) {
        json_error_t jerr;
        results = json_load_file("training/results.json", 0, &jerr);
        check(results != NULL, "training/results.json", "%s", jerr.text);
    }
    check(http(base, "/models", NULL, &j) == 200, "GET /models", "status");
    json_t *list = json_object_get(j, "models");
    check(json_array_size(list) == 4 && json_array_size(json_object_get(j, "unavailable")) == 0, "GET /models",
          "%zu models", json_array_size(list));
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *nm = json_string_value(json_object_get(e, "name")), *kind = json_string_value(json_object_get(e, "kind"));
        const char *rule = json_string_value(json_object_get(e, "rule"));
        int tf = nm && !strcmp(nm, "transformer");
        check(nm && kind && rule && !strcmp(kind, tf ? "transformer" : "seq2seq") &&
                  !strcmp(rule, tf ? "multihead" : nm) && json_is_integer(json_object_get(e, "params")) &&
                  json_is_object(json_object_get(e, "sizes")) && json_object_get(e, "bleu") &&
                  json_is_object(json_object_get(e, "trained_on")),
              "GET /models entry", "%s", nm ? nm : "?");
        /* results.json scores both searches of every shipped model (the
         * Transformer's greedy one under evaluate.py's "greedyb") */
        json_t *bl = json_object_get(e, "bleu");
        check(!json_is_number(json_object_get(bl, "beam4")) || json_is_number(json_object_get(bl, "greedy")),
              "GET /models bleu", "%s: beam-4 BLEU without the greedy one", nm ? nm : "?");
        check_alignment(nm ? nm : "?", e);
        check_trained_on(nm ? nm : "?", e, results);
    }
    json_decref(results);
    json_decref(j);
    for (int i = 0; i < 4; i++) {
        translate_matches(base, models[i], "Open the file", 1, 0, 0);
        translate_matches(base, models[i], "Save the document as a new file?", 4, 0, 0);
        translate_matches(base, models[i], "Show hidden files", 2, 3, 0);
    }
    const char *p = "/models/general/translate";
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char *bigbody = malloc(6000), words[1000] = "";
    snprintf(bigbody, 6000, "{\"text\":\"%s\"}", big);
    for (int i = 0; i < 60; i++)
        strcat(words, "word ");
    char wbody[1100];
    snprintf(wbody, sizeof wbody, "{\"text\":\"%s\"}", words);
    expect_error(base, p, "{\"text\":\"\"}", 422, "invalid_param", "text");
    expect_error(base, p, "{\"text\":\"    \"}", 422, "invalid_param", "text");
    expect_error(base, p, wbody, 422, "invalid_param", "text");
    expect_error(base, p, bigbody, 422, "invalid_param", "text");
    expect_error(base, p, "{\"text\":5}", 400, "invalid_field", "text");
    expect_error(base, p, "{\"text\":null}", 400, "invalid_field", "text");
    expect_error(base, p, "{\"text\":[\"a\"]}", 400, "invalid_field", "text");
    expect_error(base, p, "{}", 400, "missing_field", "text");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":0}", 422, "invalid_param", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":9}", 422, "invalid_param", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":-1}", 422, "invalid_param", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":99999999999999999}", 422, "invalid_param", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":\"2\"}", 400, "invalid_field", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":2.5}", 400, "invalid_field", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"beam\":true}", 400, "invalid_field", "beam");
    expect_error(base, p, "{\"text\":\"a\",\"max_len\":0}", 422, "invalid_param", "max_len");
    expect_error(base, p, "{\"text\":\"a\",\"max_len\":65}", 422, "invalid_param", "max_len");
    expect_error(base, p, "{\"text\":\"a\",\"max_len\":\"x\"}", 400, "invalid_field", "max_len");
    expect_error(base, p, "{\"text\":\"a\",\"temperature\":1}", 400, "unknown_field", "temperature");
    expect_error(base, p, "{\"text\":\"a\"", 400, "invalid_json", NULL);
    expect_error(base, p, "[\"a\"]", 400, "invalid_json", NULL);
    expect_error(base, p, "{\"text\":\"a\",\"text\":\"b\"}", 400, "invalid_json", NULL);
    /* the longest text, every byte escaped, is read; a longer body is refused unread */
    char *esc = malloc(4096 * 6 + 64), *pad = malloc(70000 + 64);
    strcpy(esc, "{\"text\":\"");
    for (int i = 0; i < 4096; i++)
        strcat(esc + 9 + 6 * i, "\\u0061");
    strcat(esc, "\"}");
    expect_error(base, p, esc, 422, "invalid_param", "text");
    snprintf(pad, 70064, "{\"text\":\"a\"%70000s}", "");
    expect_error(base, p, pad, 413, "too_large", NULL);
    free(esc);
    free(pad);
    expect_error(base, "/models/nope/translate", "{\"text\":\"a\"}", 404, "unknown_model", NULL);
    expect_error(base, "/models/general/translat", "{\"text\":\"a\"}", 404, "not_found", NULL);
    expect_error(base, "/models/general/translate", NULL, 405, "method_not_allowed", NULL);
    free(bigbody);
    /* concurrent translations stay correct: 8 threads x 6 requests, each checked against the library */
    worker w[8];
    pthread_t th[8];
    double t0 = now_ms();
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){base, models, i, 0};
        pthread_create(&th[i], NULL, worker_run, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    check(bad == 0, "concurrent translations", "%d of 48 differ from the library", bad);
    printf("http: 48 concurrent translations (8 threads) identical to the library, %.0f ms "
           "(%d answers 503 overloaded, retried)\n", now_ms() - t0, (int)overloaded_retries);
    check(http(base, "/healthz", NULL, NULL) == 200, "alive", "the server died");
    server_stop(pid);
    /* a directory with a broken model: served without it (listed as unavailable), strict refuses to start */
    char path[1300];
    for (int i = 0; i < 3; i++) {
        make_bad(names[i], names[i], NULL, 0, NULL, NULL);
    }
    make_bad("general", "general", NULL, 0, pk_nan, NULL);
    snprintf(path, sizeof path, "%s/bpe.json", bad_dir);
    char *bpe = read_all("training/bpe.json", NULL);
    write_all(path, bpe, strlen(bpe));
    free(bpe);
    pid = server_start(bad_dir, 0, base, &st);
    if (check(pid > 0, "server with a broken model", "did not start")) {
        j = NULL;
        http(base, "/models", NULL, &j);
        json_t *u = json_array_get(json_object_get(j, "unavailable"), 0);
        const char *msg = json_string_value(json_object_get(u, "error"));
        check(json_array_size(json_object_get(j, "models")) == 2 && msg && strstr(msg, "decoder.gru.bias_hh"),
              "broken model listed", "%s", msg ? msg : "-");
        json_decref(j);
        expect_error(base, "/models/general/translate", "{\"text\":\"a\"}", 404, "unknown_model", NULL);
        server_stop(pid);
    }
    pid = server_start(bad_dir, 1, base, &st);
    check(pid == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "strict start", "started or crashed (%d)", st);
    server_stop(pid);
    /* the weights without their tokenizer: every model listed as unavailable, saying why */
    remove(path);
    pid = server_start(bad_dir, 0, base, &st);
    if (check(pid > 0, "server without its tokenizer", "did not start")) {
        j = NULL;
        http(base, "/models", NULL, &j);
        json_t *un = json_object_get(j, "unavailable");
        const char *msg = json_string_value(json_object_get(json_array_get(un, 0), "error"));
        check(json_array_size(json_object_get(j, "models")) == 0 && json_array_size(un) == 3 && msg &&
                  strstr(msg, "tokenizer"),
              "no tokenizer: every model listed as unavailable", "%zu unavailable: %s", json_array_size(un),
              msg ? msg : "-");
        json_decref(j);
        server_stop(pid);
    }
    /* an empty directory: no models, still serving */
    snprintf(path, sizeof path, "%s/empty", out_dir);
    mkdir(path, 0755);
    pid = server_start(path, 0, base, &st);
    if (check(pid > 0, "server without weights", "did not start")) {
        j = NULL;
        check(http(base, "/models", NULL, &j) == 200 && json_array_size(json_object_get(j, "models")) == 0,
              "no models", "listed some");
        json_decref(j);
        server_stop(pid);
    }
}

/* ------------------------------------------------------------ main (first cut) */

static char http_dir[1024];

static void read_manifest(const char *dir)
{
    char path[1200], line[3200];
    snprintf(out_dir, sizeof out_dir, "%s", dir);
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char nm[64], kind[64], w[1024], r[1024];
        if (!strncmp(line, "http ", 5))
            snprintf(http_dir, sizeof http_dir, "%.1000s", line + 5);
        else if (!strncmp(line, "attn_sentences ", 15))
            attn_sentences = atoi(line + 15);
        else if (sscanf(line, "model %63s %63s %1023s %1023s", nm, kind, w, r) == 4)
            for (int i = 0; i < 4; i++)
                if (!strcmp(nm, names[i])) {
                    snprintf(model_dir[i], sizeof model_dir[i], "%s", w);
                    snprintf(model_ref[i], sizeof model_ref[i], "%s", r);
                    model_trained[i] = !strcmp(kind, "trained");
                }
    }
    fclose(f);
    snprintf(weights_dir, sizeof weights_dir, "%s", http_dir);
}

int main(int argc, char **argv)
{
    const char *ref = "build/models_ref";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ref"))
            ref = argv[i + 1];
        else if (!strcmp(argv[i], "--n"))
            max_sentences = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--server"))
            server_path = argv[i + 1];
        else if (!strcmp(argv[i], "--log"))
            log_path = argv[i + 1];
    }
    read_manifest(ref);
    char err[MDL_ERR_LEN];
    tok = mdl_tok_load("training/bpe.json", err, sizeof err);
    if (!check(tok != NULL, "tokenizer load", "%s", err))
        return 1;
    read_split();
    ctx = attn_ctx_new(1);
    test_tokenizer();
    test_weight_files();
    for (int i = 0; i < 4; i++) {
        model_stats st;
        test_model(i, &st);
    }
    snprintf(weights_dir, sizeof weights_dir, "%s", http_dir);
    printf("http: the server on %s\n", http_dir);
    if (server_path) {
        mdl_model *models[4];
        int ok = 1;
        for (int i = 0; i < 4; i++)
            ok &= check((models[i] = mdl_load(weights_dir, names[i], tok, err, sizeof err)) != NULL, "load", "%s", err);
        if (ok)
            test_http_models(models);
        for (int i = 0; i < 4; i++)
            mdl_free(ok ? models[i] : NULL);
    }
    mdl_tok_free(tok);
    attn_ctx_free(ctx);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
