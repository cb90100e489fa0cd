/* golden.c - the reader for the case files in tests/golden/ (format in golden.h). */
#include "golden.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Golden files are written by our own generator, but a truncated or
 * hand-edited file must fail with a message, not crash: every count is
 * bounded and checked. */
#define GOLDEN_MAX_COUNT (INT64_C(1) << 26)

typedef struct {
    const char *path;
    FILE *fp;
    int line;
    char *err;
    size_t errlen;
} reader;

static int fail(reader *r, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(r->err, r->errlen, "%s:%d: ", r->path, r->line);
    if (n < 0 || (size_t)n >= r->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Next token of the value stream, skipping newlines and comments, which may
 * not appear inside a tensor's values but are harmless. Returns 0 at EOF. */
static int next_token(reader *r, char *tok, size_t cap)
{
    int ch;
    size_t n = 0;
    do {
        ch = fgetc(r->fp);
        if (ch == '\n')
            r->line++;
    } while (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r');
    if (ch == EOF)
        return 0;
    while (ch != EOF && ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
        if (n + 1 < cap)
            tok[n++] = (char)ch;
        ch = fgetc(r->fp);
    }
    tok[n] = '\0';
    if (ch == '\n')
        ungetc(ch, r->fp);
    return 1;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
}

uint64_t golden_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void golden_fill_uniform(uint64_t *state, float *dst, int64_t n, int64_t fan_in)
{
    /* volatile keeps each step a float32 rounding, as documented. */
    volatile float bound = 1.0f / sqrtf((float)fan_in);
    for (int64_t i = 0; i < n; i++) {
        volatile float u = (float)(golden_splitmix64(state) >> 40) * 0x1p-24f;
        volatile float t = 2.0f * u - 1.0f;
        dst[i] = t * bound;
    }
}

golden_seed_spec golden_spec(const char *name, int rank, int64_t a, int64_t b, int64_t fan)
{
    golden_seed_spec sp = {name, rank, {a, b}, fan};
    return sp;
}

size_t golden_mha_seed_specs(int64_t E, int64_t kdim, int64_t vdim, int64_t H, int64_t Hkv,
                             int residual_norm, golden_seed_spec *sp)
{
    size_t n = 0;
    int64_t kv = Hkv * (E / H);
    if (Hkv != H) {
        sp[n++] = golden_spec("W_q.weight", 2, E, E, E);
        sp[n++] = golden_spec("W_q.bias", 1, E, 0, E);
        sp[n++] = golden_spec("W_k.weight", 2, kv, kdim, kdim);
        sp[n++] = golden_spec("W_k.bias", 1, kv, 0, kdim);
        sp[n++] = golden_spec("W_v.weight", 2, kv, vdim, vdim);
        sp[n++] = golden_spec("W_v.bias", 1, kv, 0, vdim);
        sp[n++] = golden_spec("W_o.weight", 2, E, E, E);
        sp[n++] = golden_spec("W_o.bias", 1, E, 0, E);
    } else {
        if (kdim == E && vdim == E) {
            sp[n++] = golden_spec("in_proj_weight", 2, 3 * E, E, E);
        } else {
            sp[n++] = golden_spec("q_proj_weight", 2, E, E, E);
            sp[n++] = golden_spec("k_proj_weight", 2, E, kdim, kdim);
            sp[n++] = golden_spec("v_proj_weight", 2, E, vdim, vdim);
        }
        sp[n++] = golden_spec("in_proj_bias", 1, 3 * E, 0, E);
        sp[n++] = golden_spec("out_proj.weight", 2, E, E, E);
        sp[n++] = golden_spec("out_proj.bias", 1, E, 0, E);
    }
    if (residual_norm) {
        sp[n++] = golden_spec("norm.weight", 1, E, 0, -1);
        sp[n++] = golden_spec("norm.bias", 1, E, 0, -2);
    }
    return n;
}

/* Parses "<name> <rank> <dims...> [splitmix64 seed fan_in]" after the kind
 * word and reads the values that follow. */
static int read_block(reader *r, golden_kind kind, char *rest, golden_tensor *t)
{
    char *save = NULL;
    char *name = strtok_r(rest, " \t", &save);
    char *tok = strtok_r(NULL, " \t", &save);
    char *end;
    memset(t, 0, sizeof *t);
    t->kind = kind;
    if (!name || !tok)
        return fail(r, "expected '<name> <rank> <dims...>'");
    if (strlen(name) >= sizeof t->name)
        return fail(r, "name too long");
    strcpy(t->name, name);
    long rank = strtol(tok, &end, 10);
    if (*end || rank < 0 || rank > GOLDEN_MAX_RANK)
        return fail(r, "bad rank '%s'", tok);
    t->rank = (int)rank;
    t->count = 1;
    for (int d = 0; d < t->rank; d++) {
        tok = strtok_r(NULL, " \t", &save);
        long long v = tok ? strtoll(tok, &end, 10) : -1;
        if (!tok || *end || v < 0 || v > GOLDEN_MAX_COUNT)
            return fail(r, "bad dimension %d", d);
        t->shape[d] = v;
        if (v != 0 && t->count > GOLDEN_MAX_COUNT / v)
            return fail(r, "tensor too large");
        t->count *= v;
    }
    t->f = malloc(sizeof(float) * (size_t)(t->count ? t->count : 1));
    if (!t->f)
        return fail(r, "out of memory");
    if (kind == GOLDEN_MASK) {
        t->m = malloc((size_t)(t->count ? t->count : 1));
        if (!t->m)
            return fail(r, "out of memory");
    }
    tok = strtok_r(NULL, " \t", &save);
    if (tok) {
        if (kind != GOLDEN_PARAM || strcmp(tok, "splitmix64") != 0)
            return fail(r, "unexpected '%s' after the shape", tok);
        char *s = strtok_r(NULL, " \t", &save);
        char *f = strtok_r(NULL, " \t", &save);
        if (!s || !f)
            return fail(r, "splitmix64 needs <seed> <fan_in>");
        uint64_t state = strtoull(s, &end, 10);
        if (*end)
            return fail(r, "bad seed '%s'", s);
        long long fan = strtoll(f, &end, 10);
        if (*end || fan <= 0)
            return fail(r, "bad fan_in '%s'", f);
        golden_fill_uniform(&state, t->f, t->count, fan);
        return 0;
    }
    for (int64_t i = 0; i < t->count; i++) {
        char num[64];
        if (!next_token(r, num, sizeof num))
            return fail(r, "%s: end of file after %lld of %lld values", t->name,
                        (long long)i, (long long)t->count);
        errno = 0;
        double v = strtod(num, &end);
        if (*end || (errno == ERANGE && fabs(v) > 1.0))
            return fail(r, "%s: bad value '%s'", t->name, num);
        if (kind == GOLDEN_MASK) {
            if (v != 0.0 && v != 1.0)
                return fail(r, "%s: mask values are 0 or 1, not '%s'", t->name, num);
            t->m[i] = (uint8_t)(v != 0.0);
        }
        t->f[i] = (float)v;
    }
    if (t->count == 0)
        return 0;
    /* Finish the line the last value was on. */
    int ch;
    while ((ch = fgetc(r->fp)) != EOF && ch != '\n')
        if (ch != ' ' && ch != '\t' && ch != '\r')
            return fail(r, "%s: more values than its shape holds", t->name);
    r->line++;
    return 0;
}

static void free_tensor(golden_tensor *t)
{
    free(t->f);
    free(t->m);
    t->f = NULL;
    t->m = NULL;
}

/* An array of n elements (elem bytes each, *cap allocated) with room for
 * one more: the same array, or a larger one (doubled, from 8); NULL when
 * out of memory, the old array then left as it was. */
static void *room_for_one(void *items, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? 2 * *cap : 8;
    void *p = realloc(items, c * elem);
    if (p)
        *cap = c;
    return p;
}

int golden_load(const char *path, golden_case *out, char *err, size_t errlen)
{
    reader r = {path, NULL, 0, err, errlen};
    char line[1024];
    int ended = 0, rc = 0;
    size_t cap_t = 0, cap_o = 0;

    memset(out, 0, sizeof *out);
    r.fp = fopen(path, "r");
    if (!r.fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (rc == 0 && !ended && fgets(line, sizeof line, r.fp)) {
        r.line++;
        if (!strchr(line, '\n') && !feof(r.fp)) {
            rc = fail(&r, "line too long");
            break;
        }
        trim(line);
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *sp = strchr(line, ' ');
        char *rest = sp ? sp + 1 : line + strlen(line);
        if (sp)
            *sp = '\0';
        golden_kind kind;
        if (strcmp(line, "case") == 0) {
            snprintf(out->name, sizeof out->name, "%s", rest);
            continue;
        }
        if (!out->name[0]) {
            rc = fail(&r, "the first line must be 'case <name>'");
            break;
        }
        if (strcmp(line, "rule") == 0) {
            snprintf(out->rule, sizeof out->rule, "%s", rest);
            continue;
        }
        if (strcmp(line, "end") == 0) {
            ended = 1;
            continue;
        }
        if (strcmp(line, "tensor") == 0)
            kind = GOLDEN_TENSOR;
        else if (strcmp(line, "mask") == 0)
            kind = GOLDEN_MASK;
        else if (strcmp(line, "param") == 0)
            kind = GOLDEN_PARAM;
        else if (strcmp(line, "expect") == 0)
            kind = GOLDEN_EXPECT;
        else {
            golden_option *o = room_for_one(out->options, out->n_options, &cap_o, sizeof *o);
            if (!o) {
                rc = fail(&r, "out of memory");
                break;
            }
            out->options = o;
            o += out->n_options++;
            size_t kl = strlen(line), vl = strlen(rest);
            if (kl >= sizeof o->key || vl >= sizeof o->value) {
                rc = fail(&r, "option %.40s: name or value too long", line);
                break;
            }
            memcpy(o->key, line, kl + 1);
            memcpy(o->value, rest, vl + 1);
            continue;
        }
        golden_tensor *t = room_for_one(out->tensors, out->n_tensors, &cap_t, sizeof *t);
        if (!t) {
            rc = fail(&r, "out of memory");
            break;
        }
        out->tensors = t;
        rc = read_block(&r, kind, rest, &t[out->n_tensors++]);
    }
    if (rc == 0 && !ended)
        rc = fail(&r, "missing 'end' (truncated file?)");
    if (rc == 0 && !out->rule[0])
        rc = fail(&r, "missing 'rule'");
    fclose(r.fp);
    if (rc != 0)
        golden_free(out);
    return rc;
}

void golden_free(golden_case *c)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        free_tensor(&c->tensors[i]);
    free(c->tensors);
    free(c->options);
    c->tensors = NULL;
    c->options = NULL;
    c->n_tensors = c->n_options = 0;
}

const golden_tensor *golden_get(const golden_case *c, golden_kind kind, const char *name)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].kind == kind && strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}

const char *golden_opt(const golden_case *c, const char *key)
{
    for (size_t i = 0; i < c->n_options; i++)
        if (strcmp(c->options[i].key, key) == 0)
            return c->options[i].value;
    return NULL;
}

long long golden_opt_int(const golden_case *c, const char *key, long long def)
{
    const char *v = golden_opt(c, key);
    return v ? strtoll(v, NULL, 10) : def;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int golden_list(const char *dir, char ***paths)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    int n = 0, cap = 0;
    *paths = NULL;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                goto oom;
            v = nv;
        }
        size_t sz = strlen(dir) + 1 + len + 1;
        v[n] = malloc(sz);
        if (!v[n])
            goto oom;
        snprintf(v[n], sz, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(v, (size_t)n, sizeof *v, cmp_str);
    *paths = v;
    return n;
oom:
    closedir(d);
    golden_list_free(v, n);
    return -1;
}

void golden_list_free(char **paths, int n)
{
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}
