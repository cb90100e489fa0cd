/* tok.c - the BPE tokenizer of training/tokenizer.py, bit for bit (its docstring is the spec). */
#include "mdl.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MARK 0x2581u
#define TOK_MAX_PUNCT 128

/* Open-addressing map from a 64-bit key to two ints. */
typedef struct {
    uint64_t *key; /* key + 1; 0 = empty */
    int32_t *v1, *v2;
    size_t cap;    /* power of two */
} tok_map;

struct mdl_tok {
    int n;
    char **str;        /* token texts */
    tok_map cp;        /* code point -> id of its single-code-point token */
    tok_map pair;      /* (a << 32 | b) -> rank, id of a+b */
    tok_map text;      /* hash of a token text -> id (loading only) */
    uint32_t punct[TOK_MAX_PUNCT];
    int n_punct;
};

static uint64_t tok_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int map_init(tok_map *m, size_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 16)
        m->cap <<= 1;
    m->key = calloc(m->cap, sizeof *m->key);
    m->v1 = calloc(m->cap, sizeof *m->v1);
    m->v2 = calloc(m->cap, sizeof *m->v2);
    return m->key && m->v1 && m->v2 ? 0 : -1;
}

static void map_free(tok_map *m)
{
    free(m->key);
    free(m->v1);
    free(m->v2);
    memset(m, 0, sizeof *m);
}

/* Returns the slot of key: its own, or the empty one where it would go. */
static size_t map_slot(const tok_map *m, uint64_t key)
{
    size_t i = (size_t)tok_mix(key) & (m->cap - 1);
    while (m->key[i] && m->key[i] != key + 1)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_get(const tok_map *m, uint64_t key, int32_t *v1, int32_t *v2)
{
    size_t i = map_slot(m, key);
    if (!m->key[i])
        return 0;
    if (v1)
        *v1 = m->v1[i];
    if (v2)
        *v2 = m->v2[i];
    return 1;
}

/* Inserts; returns 1 when the key was already there (nothing changed). */
static int map_put(tok_map *m, uint64_t key, int32_t v1, int32_t v2)
{
    size_t i = map_slot(m, key);
    if (m->key[i])
        return 1;
    m->key[i] = key + 1;
    m->v1[i] = v1;
    m->v2[i] = v2;
    return 0;
}

/* Decodes one UTF-8 code point at s[0..n); returns its length, or 0 when
 * invalid (overlong, surrogate, beyond U+10FFFF, truncated). */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

/* The one code point of s, or -1 when s is not exactly one. */
static int64_t single_cp(const char *s)
{
    size_t n = strlen(s);
    uint32_t cp;
    int k = n ? utf8_next((const unsigned char *)s, n, &cp) : 0;
    return k && (size_t)k == n ? (int64_t)cp : -1;
}

static uint64_t text_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h >> 1; /* keys must not be UINT64_MAX */
}

/* Id of the token whose text is a (la bytes) followed by b (lb bytes), or -1. */
static int32_t text_id(const mdl_tok *t, const char *a, size_t la, const char *b, size_t lb)
{
    char buf[512];
    if (la + lb >= sizeof buf)
        return -1;
    memcpy(buf, a, la);
    memcpy(buf + la, b, lb);
    uint64_t h = text_hash(buf, la + lb);
    for (size_t i = (size_t)tok_mix(h) & (t->text.cap - 1); t->text.key[i];
         i = (i + 1) & (t->text.cap - 1)) {
        int32_t id = t->text.v1[i];
        if (t->text.key[i] == h + 1 && strlen(t->str[id]) == la + lb && !memcmp(t->str[id], buf, la + lb))
            return id;
    }
    return -1;
}

static int tok_fail(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tok_fail(char *err, size_t errn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return -1;
}

/* Vocabulary: texts, the text index and the code point map. */
static int tok_vocab(mdl_tok *t, json_t *voc, const char *path, char *err, size_t errn)
{
    static const char *specials[4] = {"<pad>", "<bos>", "<eos>", "<unk>"};
    size_t n = json_array_size(voc);
    if (n < 5 || n > (1u << 20))
        return tok_fail(err, errn, "%s: vocab must have 5 to 2^20 entries", path);
    t->str = calloc(n, sizeof *t->str);
    if (!t->str || map_init(&t->cp, n) || map_init(&t->text, n) || map_init(&t->pair, n))
        return tok_fail(err, errn, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(voc, i);
        if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) >= 256 ||
            strlen(json_string_value(s)) != json_string_length(s))
            return tok_fail(err, errn, "%s: vocab entry %zu is not a 1-255 byte string", path, i);
        if (!(t->str[i] = strdup(json_string_value(s))))
            return tok_fail(err, errn, "%s: out of memory", path);
        t->n = (int)i + 1;
        if (i < 4 && strcmp(t->str[i], specials[i]) != 0)
            return tok_fail(err, errn, "%s: vocab entry %zu must be %s", path, i, specials[i]);
        uint64_t h = text_hash(t->str[i], strlen(t->str[i]));
        if (text_id(t, t->str[i], strlen(t->str[i]), "", 0) >= 0)
            return tok_fail(err, errn, "%s: vocab entry %zu (%.40s) is a duplicate", path, i, t->str[i]);
        size_t slot = (size_t)tok_mix(h) & (t->text.cap - 1);
        while (t->text.key[slot])
            slot = (slot + 1) & (t->text.cap - 1);
        t->text.key[slot] = h + 1;
        t->text.v1[slot] = (int32_t)i;
        int64_t cp = i >= 4 ? single_cp(t->str[i]) : -1;
        if (cp >= 0)
            map_put(&t->cp, (uint64_t)cp, (int32_t)i, 0);
    }
    return 0;
}

static int tok_merges(mdl_tok *t, json_t *mer, const char *path, char *err, size_t errn)
{
    size_t n = json_array_size(mer);
    for (size_t r = 0; r < n; r++) {
        json_t *m = json_array_get(mer, r);
        const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
        if (!json_is_array(m) || json_array_size(m) != 2 || !a || !b)
            return tok_fail(err, errn, "%s: merge %zu is not a pair of strings", path, r);
        int32_t ia = text_id(t, a, strlen(a), "", 0), ib = text_id(t, b, strlen(b), "", 0);
        int32_t iab = text_id(t, a, strlen(a), b, strlen(b));
        if (ia < 0 || ib < 0 || iab < 0)
            return tok_fail(err, errn, "%s: merge %zu (%.40s %.40s): a part or the result is not in "
                            "the vocab", path, r, a, b);
        map_put(&t->pair, (uint64_t)ia << 32 | (uint32_t)ib, (int32_t)r, iab);
    }
    return 0;
}

static int tok_punct(mdl_tok *t, json_t *p, const char *path, char *err, size_t errn)
{
    const char *s = json_string_value(p);
    if (!s)
        return tok_fail(err, errn, "%s: punct must be a string", path);
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (!k || t->n_punct >= TOK_MAX_PUNCT)
            return tok_fail(err, errn, "%s: punct is not valid UTF-8 of at most %d code points",
                            path, TOK_MAX_PUNCT);
        t->punct[t->n_punct++] = cp;
        i += (size_t)k;
    }
    return 0;
}

mdl_tok *mdl_tok_load(const char *path, char *err, size_t errn)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    mdl_tok *t = calloc(1, sizeof *t);
    int rc = -1;
    if (!root)
        tok_fail(err, errn, "%s: %s (line %d)", path, je.text, je.line);
    else if (!t)
        tok_fail(err, errn, "%s: out of memory", path);
    else if (!json_is_array(json_object_get(root, "vocab")) || !json_is_array(json_object_get(root, "merges")))
        tok_fail(err, errn, "%s: needs the arrays vocab and merges", path);
    else if (!json_is_string(json_object_get(root, "marker")) ||
             single_cp(json_string_value(json_object_get(root, "marker"))) != TOK_MARK)
        tok_fail(err, errn, "%s: marker must be U+2581", path);
    else if (!tok_vocab(t, json_object_get(root, "vocab"), path, err, errn) &&
             !tok_merges(t, json_object_get(root, "merges"), path, err, errn) &&
             !tok_punct(t, json_object_get(root, "punct"), path, err, errn))
        rc = 0;
    if (rc == 0 && !map_get(&t->cp, TOK_MARK, NULL, NULL))
        rc = tok_fail(err, errn, "%s: the marker U+2581 is not in the vocab", path);
    json_decref(root);
    if (rc) {
        mdl_tok_free(t);
        return NULL;
    }
    return t;
}

void mdl_tok_free(mdl_tok *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        free(t->str[i]);
    free(t->str);
    map_free(&t->cp);
    map_free(&t->pair);
    map_free(&t->text);
    free(t);
}

int mdl_tok_vocab_size(const mdl_tok *t) { return t->n; }

const char *mdl_tok_str(const mdl_tok *t, int id)
{
    return id >= 0 && id < t->n ? t->str[id] : NULL;
}

static int is_punct(const mdl_tok *t, uint32_t cp)
{
    for (int i = 0; i < t->n_punct; i++)
        if (t->punct[i] == cp)
            return 1;
    return 0;
}

/* BPE of one piece: sym[0..n) holds code point ids (-1 unknown); merges in
 * place, then appends the ids (unknown -> <unk>) to ids. */
static void tok_piece(const mdl_tok *t, int32_t *sym, int64_t n, int32_t *ids, int64_t cap, int64_t *k)
{
    while (n > 1) {
        int32_t best = INT32_MAX, a = 0, b = 0, r, ab, res = 0;
        for (int64_t i = 0; i + 1 < n; i++)
            if (sym[i] >= 0 && sym[i + 1] >= 0 &&
                map_get(&t->pair, (uint64_t)sym[i] << 32 | (uint32_t)sym[i + 1], &r, &ab) && r < best) {
                best = r;
                a = sym[i];
                b = sym[i + 1];
                res = ab;
            }
        if (best == INT32_MAX)
            break;
        int64_t w = 0;
        for (int64_t i = 0; i < n; i++) {
            if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
                sym[w++] = res;
                i++;
            } else {
                sym[w++] = sym[i];
            }
        }
        n = w;
    }
    for (int64_t i = 0; i < n; i++, (*k)++)
        if (*k < cap)
            ids[*k] = sym[i] >= 0 ? sym[i] : MDL_UNK;
}

static int32_t cp_id(const mdl_tok *t, uint32_t cp)
{
    int32_t id;
    return map_get(&t->cp, cp, &id, NULL) ? id : -1;
}

int64_t mdl_tok_encode(const mdl_tok *t, const char *text, size_t len, int32_t *ids, int64_t cap)
{
    if (len > MDL_MAX_TEXT_BYTES)
        return -1;
    int32_t sym[MDL_MAX_TEXT_BYTES + 1];
    const unsigned char *s = (const unsigned char *)text;
    int64_t k = 0, n = 0;
    int first = 1; /* the next piece is the first of its word */
    for (size_t i = 0; i <= len;) {
        uint32_t cp = ' ';
        int step = 1;
        if (i < len && !(step = utf8_next(s + i, len - i, &cp)))
            return -1;
        int punct = i < len && is_punct(t, cp);
        if ((cp == ' ' || punct) && n > 0) { /* close the run */
            tok_piece(t, sym, n, ids, cap, &k);
            n = 0;
            first = 0;
        }
        if (cp == ' ') {
            first = 1;
        } else {
            if (first && n == 0)
                sym[n++] = cp_id(t, TOK_MARK);
            sym[n++] = cp_id(t, cp);
            if (punct) {
                tok_piece(t, sym, n, ids, cap, &k);
                n = 0;
                first = 0;
            }
        }
        i += (size_t)step;
    }
    return k;
}

char *mdl_tok_decode(const mdl_tok *t, const int32_t *ids, int64_t n)
{
    size_t total = 1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= 4 && ids[i] < t->n)
            total += strlen(t->str[ids[i]]);
    char *out = malloc(total), *p = out;
    if (!out)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 4 || ids[i] >= t->n)
            continue;
        for (const char *s = t->str[ids[i]]; *s; s++) {
            if ((unsigned char)s[0] == 0xe2 && (unsigned char)s[1] == 0x96 && (unsigned char)s[2] == 0x81) {
                *p++ = ' ';
                s += 2;
            } else {
                *p++ = *s;
            }
        }
    }
    *p = '\0';
    if (out[0] == ' ')
        memmove(out, out + 1, strlen(out));
    return out;
}
