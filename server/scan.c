/* scan.c - the request body's fast path: lifts big numeric arrays (parsed
 * straight into float32) and long strings (base64) out of the JSON text,
 * leaving a small envelope for Jansson, whose parser is ~30 MB/s.
 *
 * The scanner is conservative: anything it does not fully understand (a
 * ragged or non-finite array, a string with escapes, broken JSON) is copied
 * as is, so Jansson and the codec's slow path report the exact error. */
#include "srv.h"
#include "numparse.h"

#include <stdatomic.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#define MIN_ARRAY_TEXT 128   /* shorter arrays are cheap for Jansson */
#define MIN_STRING_TEXT 256

typedef struct {
    srv_blob *v;
    size_t n, cap;
} blob_vec;

static srv_blob *blob_push(blob_vec *bv)
{
    if (bv->n == bv->cap) {
        /* from 4: a small body has a few, and 4 stay under malloc's
         * per-thread cache limit (16 did not, costing a consolidation) */
        size_t cap = bv->cap ? bv->cap * 2 : 4;
        srv_blob *p = realloc(bv->v, cap * sizeof *p);
        if (!p)
            return NULL;
        bv->v = p;
        bv->cap = cap;
    }
    srv_blob *b = &bv->v[bv->n++];
    memset(b, 0, sizeof *b);
    return b;
}

/* Writes {"\u0001k":i}, the placeholder of blob i (k: 't' or 's'). */
static char *put_placeholder(char *o, char k, size_t i)
{
    memcpy(o, "{\"\\u0001", 8);
    o[8] = k;
    o[9] = '"';
    o[10] = ':';
    o += 11;
    o += srv_fmt_u64(i, o);
    *o++ = '}';
    return o;
}

enum { PART_ALL, PART_HEAD, PART_TAIL }; /* parse_array's modes */

/* A big array parsed on two threads (parse_split): the helper (a kept
 * thread, tasks.c) finds where to split and publishes it in mid (the byte
 * after a ',' between two elements at depth level: 1, the top level, but
 * 2 in a batch of one such as (1, L, E), and so on), then parses from there to
 * the array's end into b; the caller parses from the start, and stops at
 * mid when it meets it (stopped): it compares at every ',' of that depth, and
 * publishes where it is (at), so the split halves what is left (it misses
 * mid only if it parsed half of that meanwhile). A caller that parsed the
 * whole array sets cancel, and the helper gives up its walk or tail at
 * the next row; if no thread took the task by then, it never will. */
typedef struct {
    const char *p, *end;        /* the array's '[', the body's end */
    size_t budget;              /* split_point's */
    _Atomic(const char *) mid;  /* NULL until published */
    atomic_int level;           /* the depth of mid's ',': 1 until published */
    _Atomic(const char *) at;   /* the caller's last ',' at that depth, + 1 */
    atomic_int cancel;          /* the caller needs no tail */
    int stopped;                /* the caller's parse ended at mid */
    const char *stop;           /* the tail's end, NULL if not parsed */
    srv_blob b;                 /* the tail */
    srv_task task;
} split_job;

/* The depth of the split's ',' (see split_job), or 0 without a split. */
static inline int split_level(split_job *sj)
{
    return sj ? atomic_load_explicit(&sj->level, memory_order_relaxed) : 0;
}

/* At a ',' at the split's depth (p just past it): 1 when the caller's
 * parse is at the split, and ends there as a PART_HEAD parse would; -1
 * when the helper's tail parse (mode PART_TAIL) is cancelled; else 0. mid
 * is published after level, so a parse at mid that sees it reads the
 * level the tail starts from, and stops only at that depth. */
static int at_split(split_job *sj, const char *p, int mode, int depth)
{
    if (!sj)
        return 0;
    if (mode == PART_TAIL)
        return atomic_load_explicit(&sj->cancel, memory_order_relaxed) ? -1 : 0;
    atomic_store_explicit(&sj->at, p, memory_order_relaxed);
    if (p != atomic_load_explicit(&sj->mid, memory_order_acquire) || depth != split_level(sj))
        return 0;
    sj->stopped = 1;
    return 1;
}

/* Whether c starts a number ('-' or a digit), with no branch: a sign is
 * random in the data, and a branch on it mispredicts every other number. */
static inline int num_start(char c)
{
    unsigned t = (unsigned)(unsigned char)c - '-';
    return (t <= 12u) & (0x1ff9u >> (t & 15u));
}

/* Room for one more float in *data (capacity *cap, doubling); -1 when the
 * size would overflow or memory is out. */
static int grow(float **data, size_t *cap)
{
    if (*cap > SIZE_MAX / 2 / sizeof **data)
        return -1;
    float *g = realloc(*data, *cap * 2 * sizeof **data);
    if (!g)
        return -1;
    *data = g;
    *cap *= 2;
    return 0;
}

/* Bit i: p[i] is ',' or ']', for i < 64. */
static inline uint64_t stops64(const char *p)
{
#if defined(__SSE2__) && defined(__x86_64__)
    const __m128i comma = _mm_set1_epi8(','), close = _mm_set1_epi8(']');
    uint64_t m = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, comma),
                                                                 _mm_cmpeq_epi8(v, close)))
             << (16 * i);
    }
    return m;
#else
    uint64_t m = 0;
    for (int i = 0; i < 64; i++)
        m |= (uint64_t)(p[i] == ',' || p[i] == ']') << i;
    return m;
#endif
}

enum { ROW_AT_NUMBER, ROW_AFTER_COMMA, ROW_CLOSED }; /* row_run's *how */

/* The numbers of a leaf row from p (a number's start), found by their
 * separators before any is read: the ',' and ']' of 64 bytes at a time as
 * a bit mask, then each number parsed from its own start, so no parse waits
 * for the one before it to find where it ends (the one-by-one loop's chain
 * of dependent loads). Each number must be srv_parse_short's (the rows of
 * longer ones are the one-by-one loop's) and end exactly at the next
 * separator; one space may follow a ','. Returns where the caller goes on, *how saying
 * what is there: the row's ']' (ROW_CLOSED), or the first number this does
 * not take (ROW_AT_NUMBER, p itself) or the byte after the ',' before it
 * (ROW_AFTER_COMMA), when a number is of another form, is followed by
 * whitespace, or is within 128 bytes of the body's end. NULL: out of
 * memory. */
static inline const char *row_run(const char *p, const char *end, float **data, size_t *n,
                                  size_t *cap, int64_t *row, int *how)
{
    const char *s = p;
    while (end - p >= 2 * SRV_PARSE_FAST_PAD) {
        uint64_t stops = stops64(p);
        while (stops) {
            const char *t = p + __builtin_ctzll(stops);
            stops &= stops - 1;
            if (*n == *cap && grow(data, cap))
                return NULL;
            int finite, neg = *s == '-';
            if (t - s > 9 || srv_parse_short(s + neg, neg, *data + *n, &finite) != t)
                goto out;
            ++*n;
            ++*row;
            if (*t == ']') {
                *how = ROW_CLOSED;
                return t;
            }
            s = t + 1;
            s += *s == ' '; /* ", " as Python's json.dumps writes it */
        }
        if (s == p)
            break; /* no separator in 64 bytes */
        p = s;
    }
out:
    *how = *row ? ROW_AFTER_COMMA : ROW_AT_NUMBER; /* s is past a ',' once a number is in */
    return s;
}

/* What parse_array_in holds while it walks an array: the floats so far,
 * and where the nesting is. dims[d]: the length of every array at depth
 * d (-1 until one closes); cnt[d]: the elements of the open one so far;
 * leaf: the depth of the numbers (-1 until the first); end and mode may
 * change at a split (see at_split), closes with them. */
typedef struct {
    float *data;
    size_t n, cap;
    int64_t dims[ATTN_MAX_RANK], cnt[ATTN_MAX_RANK];
    int depth, leaf, closes, mode;
    int longs; /* a number was read one by one, not by row_run (srv_blob's has_long) */
    const char *end;
    split_job *sj;
} array_walk;

/* What follows a leaf row's numbers or an array's ']' (array_numbers,
 * array_close): another element, the ']' and ',' after the last one, the
 * whole array read, or text to leave to the slow path. */
enum { WALK_ELEMENT, WALK_CLOSING, WALK_DONE, WALK_BAIL };

static inline const char *skip_ws(const char *p, const char *end)
{
    while (p < end && srv_json_ws(*p))
        p++;
    return p;
}

/* At a ',' at the split's depth (p just past it): 1 when the walk ends
 * there, its end now standing for the ']' of every enclosing array; -1
 * when the walk is to stop (a cancelled tail); else 0. */
static inline __attribute__((always_inline)) int walk_split(array_walk *w, const char *p)
{
    int sp = w->depth == split_level(w->sj) ? at_split(w->sj, p, w->mode, w->depth) : 0;
    if (sp > 0) {
        w->end = p - 1;
        w->mode = PART_HEAD;
        w->closes = w->depth;
    }
    return sp;
}

/* A leaf row's numbers from *pp (a number's start): row_run's fast pass,
 * then one number at a time from where it stops, each followed by ',' and
 * whitespace or by the row's end. */
static inline __attribute__((always_inline)) int array_numbers(array_walk *w, const char **pp)
{
    const char *p = *pp;
    int64_t row = 0, *cnt = &w->cnt[w->depth - 1];
    if (!(w->sj && w->depth == split_level(w->sj))) { /* a rank-1 split checks every ',' */
        int how;
        if (!(p = row_run(p, w->end, &w->data, &w->n, &w->cap, &row, &how)))
            return WALK_BAIL;
        *pp = p;
        if (how == ROW_CLOSED) {
            *cnt += row;
            return WALK_CLOSING;
        }
        if (how == ROW_AFTER_COMMA) {
            *pp = p = skip_ws(p, w->end);
            if (!(p < w->end && num_start(*p))) {
                *cnt += row;
                return WALK_ELEMENT;
            }
        }
    }
    /* any number read here may be long: a test a number (q - p > 9, in a
     * register) cost this loop 3-4% (bench_wire --parse, in turns) */
    w->longs = 1;
    for (;;) {
        if (w->n == w->cap && grow(&w->data, &w->cap))
            return WALK_BAIL;
        int finite;
        float *x = &w->data[w->n];
        const char *q = w->end - p >= SRV_PARSE_FAST_PAD ? srv_parse_float_long(p, x, &finite) : NULL;
        w->n++;
        row++;
        if (q) {
            /* the usual separator, "," or ", ", and another number: q is
             * at most 40 bytes into the 64 known to be there */
            const char *s = q + 1;
            if (*s == ' ')
                s++;
            if ((*q == ',') & num_start(*s) && !(w->sj && w->depth == split_level(w->sj))) {
                p = s;
                continue;
            }
        } else if (!(q = srv_parse_float(p, w->end, x, &finite)) || !finite) {
            return WALK_BAIL;
        }
        p = q;
        if (p < w->end && *p == ',') {
            int sp = walk_split(w, ++p);
            if (sp < 0)
                return WALK_BAIL;
            if (sp) { /* a rank-1 array's split: the ']'s follow */
                p = w->end;
                break;
            }
            p = skip_ws(p, w->end);
            if (p < w->end && num_start(*p))
                continue;
            *cnt += row;
            *pp = p;
            return WALK_ELEMENT;
        }
        break;
    }
    *cnt += row;
    *pp = p;
    return WALK_CLOSING;
}

/* After an element: ',' (another element) or one or more ']', each of which
 * closes an array whose length must match its siblings'. WALK_DONE when
 * the outermost closes, at *pp past it. */
static inline __attribute__((always_inline)) int array_close(array_walk *w, const char **pp)
{
    const char *p = *pp;
    for (;;) {
        p = skip_ws(p, w->end);
        if (p >= w->end && !(w->mode == PART_HEAD && w->depth <= w->closes))
            return WALK_BAIL;
        if (p < w->end && *p == ',') {
            int sp = walk_split(w, ++p);
            if (sp < 0)
                return WALK_BAIL;
            if (sp) {
                p = w->end;
                continue;
            }
            *pp = p;
            return WALK_ELEMENT;
        }
        if (p < w->end && *p != ']')
            return WALK_BAIL;
        p += p < w->end; /* the head's end stands for the enclosing arrays' ']' */
        int d = --w->depth;
        if (w->dims[d] < 0)
            w->dims[d] = w->cnt[d];
        else if (w->dims[d] != w->cnt[d])
            return WALK_BAIL;
        if (d == 0) {
            *pp = p;
            return WALK_DONE;
        }
        w->cnt[d - 1]++;
    }
}

/* Parses the regular nested array at p ('[') into b, growing b->data
 * (malloc'd) as it goes: one pass, no pre-count. Returns the position after
 * the array, or NULL to leave the text to the slow path (b->data freed).
 * A leaf row's numbers are read by the inline fast parser while 64 bytes
 * remain (numparse.h), each followed by ',' and whitespace or a ']'.
 * mode PART_HEAD: end is a ',' between two elements at the split's depth,
 * and stands for the ']' of each enclosing array; PART_TAIL: p is just
 * after such a ',', that deep inside the array (see parse_split). sj (or
 * NULL): the split to stop at, which turns the parse into a PART_HEAD one
 * ending at the ',' before it. */
static inline __attribute__((always_inline)) const char *
parse_array_in(const char *p, const char *end, srv_blob *b, int mode, split_job *sj)
{
    /* closes: the ']' a PART_HEAD's end stands for */
    array_walk w = {.cap = 256, .leaf = -1, .closes = 1, .mode = mode, .end = end, .sj = sj};
    if (!(w.data = malloc(w.cap * sizeof *w.data)))
        return NULL;
    for (int i = 0; i < ATTN_MAX_RANK; i++)
        w.dims[i] = -1;
    if (mode == PART_TAIL) /* inside the array already, as deep as the split */
        for (int lv = split_level(sj); w.depth < lv;)
            w.cnt[w.depth++] = 0;
    for (;;) {
        /* expect an element (or ']' for an empty array: refused) */
        p = skip_ws(p, w.end);
        if (p >= w.end)
            break;
        if (*p == '[') {
            if (w.depth == ATTN_MAX_RANK || (w.leaf >= 0 && w.depth >= w.leaf))
                break;
            w.cnt[w.depth++] = 0;
            p++;
            continue;
        }
        if (w.depth == 0 || (w.leaf >= 0 && w.depth != w.leaf))
            break;
        w.leaf = w.depth;
        int next;
        if (*p == 't' || *p == 'f') {
            int t = *p == 't';
            if (w.end - p < 5 - t || memcmp(p, t ? "true" : "false", (size_t)(5 - t)) != 0)
                break;
            p += 5 - t;
            if (!b->has_bool)
                b->first_bool = (int64_t)w.n;
            b->has_bool = 1;
            if (w.n == w.cap && grow(&w.data, &w.cap))
                break;
            w.data[w.n++] = (float)t;
            w.cnt[w.depth - 1]++;
            next = WALK_CLOSING;
        } else {
            b->has_num = 1;
            next = array_numbers(&w, &p);
        }
        if (next == WALK_CLOSING)
            next = array_close(&w, &p);
        if (next == WALK_BAIL)
            break;
        if (next == WALK_DONE) {
            b->rank = w.leaf;
            for (int i = 0; i < w.leaf; i++)
                b->shape[i] = w.dims[i];
            b->count = (int64_t)w.n;
            b->data = w.data;
            b->has_long = w.longs;
            return p;
        }
    }
    free(w.data);
    return NULL;
}

/* parse_array_in twice: without a split (sj NULL, every test of it compiled
 * away: the hot loop as tight as it can be), and with one. */
static const char *parse_array(const char *p, const char *end, srv_blob *b, int mode)
{
    return parse_array_in(p, end, b, mode, NULL);
}

static const char *parse_array_head(const char *p, const char *end, srv_blob *b, split_job *sj)
{
    return parse_array_in(p, end, b, PART_ALL, sj);
}

static const char *parse_array_tail(const char *p, const char *end, srv_blob *b, split_job *sj)
{
    return parse_array_in(p, end, b, PART_TAIL, sj);
}

const char *srv_scan_array(const char *p, const char *end, srv_blob *b)
{
    memset(b, 0, sizeof *b);
    return parse_array(p, end, b, PART_ALL);
}

/* Arrays of at least this much text are parsed in two halves on two
 * threads (a visualization's state_dict: 4 MB for in_proj_weight, 450 KB
 * for its query): a thread costs some 50 us, the half of this 150 us. */
#ifndef SPLIT_MIN_TEXT
#define SPLIT_MIN_TEXT ((size_t)256 << 10)
#endif

/* A hint where to split the array at p: the byte after a ',' between two of
 * its top-level elements near the middle of its text, or NULL. Found from
 * the brackets alone, memchr from ']' to ']': in a regular array a '['
 * only follows '[' or ',' (and whitespace), so the depth is known at each
 * ']' run. Hostile text may mislead it; the halves' parses check the split
 * (a wrong one costs only a sequential parse). *budget bounds the bytes
 * walked in all calls for one body (its length): without it, text of many
 * '[' that never close would be walked once per '[', quadratic.
 * array_end: the walk, to the byte after the array's ']' (and its rank in
 * *rankp, and in *levelp the least depth at which a ',' separates two
 * arrays, 0 if none does: 1 unless the array is a batch of one), or NULL:
 * *open says whether the text (or *budget) ended with the array still
 * open, well formed so far. */
static const char *array_end(const char *p, const char *end, size_t *budget, int *rankp,
                             int *levelp, int *open, atomic_int *cancel)
{
    int depth = 0, rank = 0, level = 0;
    *open = 0;
    if ((size_t)(end - p) > *budget)
        end = p + *budget;
    const char *q = p, *stop = NULL;
    while (!stop) {
        while (q < end && (*q == '[' || srv_json_ws(*q)))
            depth += *q++ == '[';
        if (!rank)
            rank = depth;
        if (depth <= 0 || depth > ATTN_MAX_RANK) {
            *budget -= (size_t)(q - p);
            return NULL;
        }
        const char *r = memchr(q, ']', (size_t)(end - q));
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed))
            r = NULL, end = q; /* given up: walked to q */
        if (!r) {
            *budget -= (size_t)(end - p);
            *open = 1;
            return NULL;
        }
        q = r;
        while (q < end && (*q == ']' || srv_json_ws(*q)) && !stop)
            if (*q++ == ']' && --depth == 0)
                stop = q;
        if (!stop && (q >= end || *q++ != ',')) {
            *open = q >= end;
            *budget -= (size_t)(q - p);
            return NULL;
        }
        if (!stop && (!level || depth < level))
            level = depth;
    }
    *budget -= (size_t)(stop - p);
    *rankp = rank;
    *levelp = level;
    return stop;
}

/* split_point: also sets *levelp, the depth of the split's ','. */
static const char *split_point(const char *p, const char *end, size_t *budget,
                               _Atomic(const char *) *from, atomic_int *cancel, int *levelp)
{
    int rank, level, open;
    const char *stop = array_end(p, end, budget, &rank, &level, &open, cancel), *q;
    if (!stop || (size_t)(stop - p) < SPLIT_MIN_TEXT)
        return NULL; /* rank and level are set only with stop */
    if (rank == 1)
        level = 1;
    /* a batch of one vector, (1, n) or (1, 1, n), has no ',' between
     * arrays: its numbers' commas would do, but the other thread reads
     * them in runs (row_run) and would pass the split by */
    if (!level)
        return NULL;
    *levelp = level;
    /* the first boundary past the middle of what the other thread has yet
     * to parse: a ',' after rank - level closing brackets (for rank 1, any
     * ',') */
    q = atomic_load_explicit(from, memory_order_relaxed);
    q = q > p && q < stop ? q : p;
    q += (stop - q) / 2;
    for (;;) {
        const char *c = rank == 1 ? memchr(q, ',', (size_t)(stop - q)) : memchr(q, ']', (size_t)(stop - q));
        if (!c)
            return NULL;
        int run = 0;
        q = c;
        while (q < stop && (*q == ']' || srv_json_ws(*q)))
            run += *q++ == ']';
        if (run == rank - level && q < stop && *q == ',')
            return q + 1;
        if (q == c)
            q++;
    }
}

static void parse_tail(void *arg)
{
    split_job *t = arg;
    int level;
    const char *mid = split_point(t->p, t->end, &t->budget, &t->at, &t->cancel, &level);
    if (mid) {
        atomic_store_explicit(&t->level, level, memory_order_relaxed);
        atomic_store_explicit(&t->mid, mid, memory_order_release);
        t->stop = parse_array_tail(mid, t->end, &t->b, t);
    }
}

/* The tail t appended to the head h along dimension dim (its data
 * freed), or -1 (out of memory: both left as they were). */
static int join(srv_blob *h, srv_blob *t, int dim)
{
    float *data = realloc(h->data, (size_t)(h->count + t->count) * sizeof *data);
    if (!data)
        return -1;
    memcpy(data + h->count, t->data, (size_t)t->count * sizeof *data);
    free(t->data);
    h->data = data;
    h->shape[dim] += t->shape[dim];
    if (!h->has_bool && t->has_bool)
        h->first_bool = h->count + t->first_bool;
    h->count += t->count;
    h->has_num |= t->has_num;
    h->has_bool |= t->has_bool;
    h->has_long |= t->has_long;
    return 0;
}

static atomic_long joins; /* arrays parsed in two halves, for srv_scan_joins */

long srv_scan_joins(void) { return atomic_load_explicit(&joins, memory_order_relaxed); }

/* parse_array on two threads for an array of SPLIT_MIN_TEXT or more: a
 * helper walks it for a split point (split_point) while this thread
 * already parses from the start, up to the point once published; the
 * helper parses the rest, and the halves are joined when they agree (same
 * leaf depth and inner dimensions, as one pass would have checked). The
 * result is parse_array's: anything else (a small array, no split found,
 * no thread, a half refused, a disagreement) takes the one-pass parse. */
static const char *parse_split(const char *p, const char *end, srv_blob *b, size_t *budget)
{
    /* a thread only for an array still open, and well formed as far as
     * the walk sees, after SPLIT_MIN_TEXT: at most one per so much of the
     * body (the walk's budget) */
    int rank, level, open = 0;
    if ((size_t)(end - p) < SPLIT_MIN_TEXT || *budget < 2 * SPLIT_MIN_TEXT ||
        array_end(p, p + SPLIT_MIN_TEXT, budget, &rank, &level, &open, NULL) || !open)
        return parse_array(p, end, b, PART_ALL);
    split_job job = {.p = p, .end = end, .budget = *budget}, *t = &job;
    atomic_init(&t->mid, NULL);
    atomic_init(&t->at, NULL);
    atomic_init(&t->cancel, 0);
    atomic_init(&t->level, 1);
    if (srv_task_start(&t->task, parse_tail, t, 1) != 0)
        return parse_array(p, end, b, PART_ALL);
    srv_blob h = {0};
    const char *hs = parse_array_head(p, end, &h, t);
    if (!t->stopped)
        atomic_store_explicit(&t->cancel, 1, memory_order_relaxed);
    /* a task no thread took left mid unset (stopped is 0), stop NULL and the
     * budget as it was: the head then holds the whole array */
    srv_task_settle(&t->task);
    *budget = t->budget;
    int stopped = t->stopped;
    const char *ts = t->stop; /* the tail's end */
    srv_blob tb = t->b;
    if (!stopped) { /* the whole array here (or refused before the split) */
        if (ts)
            free(tb.data);
        if (hs)
            *b = h;
        return hs;
    }
    level = atomic_load_explicit(&t->level, memory_order_relaxed);
    int ok = hs && ts && h.rank == tb.rank && level <= h.rank;
    for (int i = 0; ok && i < h.rank; i++) /* (1, .., 1, n_h, ...) and (1, .., 1, n_t, ...) */
        ok = i < level - 1 ? h.shape[i] == 1 && tb.shape[i] == 1 : i == level - 1 || h.shape[i] == tb.shape[i];
    if (ok && join(&h, &tb, level - 1) == 0) {
        atomic_fetch_add_explicit(&joins, 1, memory_order_relaxed);
        *b = h;
        return ts;
    }
    if (hs)
        free(h.data);
    if (ts)
        free(tb.data);
    return parse_array(p, end, b, PART_ALL);
}

/* The string at *p: a long one after a colon becomes a placeholder, any
 * other is copied; *reserved set when it holds the escape \u0001, the
 * placeholders' own first character (see srv_scan_result). Returns 0 (*p
 * past it), 1 when unterminated (copied to the end for Jansson to refuse),
 * -1 when out of memory. */
static inline int scan_string(const char **pp, const char *end, char **op, blob_vec *bv,
                              int after_colon, int *reserved)
{
    const char *p = *pp;
    /* memchr runs at memory speed over megabytes of base64; only a string
     * with a backslash needs the careful walk. Both searches go 64 KiB at a
     * time, the second over what the first just read (still in cache). */
    const char *s = NULL, *w = p + 1;
    int esc = 0, bs = 0;
    size_t known = srv_body_string_len(w); /* read as it came: no quote or backslash in it */
    if (known && known < (size_t)(end - w))
        s = w + known;
    while (!s && !bs && w < end) {
        size_t k = (size_t)(end - w) < ((size_t)64 << 10) ? (size_t)(end - w) : (size_t)64 << 10;
        s = memchr(w, '"', k);
        bs = memchr(w, '\\', (size_t)((s ? s : w + k) - w)) != NULL;
        w += k;
    }
    if (!s)
        s = end;
    if (bs) {
        esc = 1;
        s = p + 1;
        while (s < end && *s != '"') {
            if (*s == '\\' && ++s < end && end - s >= 5 && memcmp(s, "u0001", 5) == 0)
                *reserved = 1;
            s++;
        }
    }
    if (s >= end) {
        memcpy(*op, p, (size_t)(end - p));
        *op += end - p;
        return 1;
    }
    size_t slen = (size_t)(s - p - 1);
    if (after_colon && !esc && slen >= MIN_STRING_TEXT) {
        srv_blob *b = blob_push(bv);
        if (!b)
            return -1;
        b->is_string = 1;
        b->str = p + 1;
        b->len = slen;
        *op = put_placeholder(*op, 's', bv->n - 1);
    } else {
        memcpy(*op, p, slen + 2);
        *op += slen + 2;
    }
    *pp = s + 1;
    return 0;
}

/* Whether text [p, end) holds an integer (no fraction or exponent)
 * beyond int64: Jansson refuses one ("too big integer"), so an array with
 * one is lifted, however short, to be read as the float it is. One within
 * int64 stays with Jansson, so an integer field (a window's side) reads
 * it as an integer. */
static int has_long_integer(const char *p, const char *end)
{
    while (p < end) {
        if (*p != '-' && (*p < '0' || *p > '9')) {
            p++;
            continue;
        }
        int neg = *p == '-';
        const char *num = p + neg;
        int digits = 0, integer = 1;
        for (; p < end && *p && strchr("-+.eE0123456789", *p); p++) {
            digits += *p >= '0' && *p <= '9';
            integer &= *p != '.' && *p != 'e' && *p != 'E';
        }
        const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
        if (integer && (digits > 19 || (digits == 19 && memcmp(num, limit, 19) > 0)))
            return 1;
    }
    return 0;
}

/* At an array after a ':' (p at its '['): parsed into a new blob (on two
 * threads when long) and replaced in the envelope at *o by the blob's
 * placeholder, its nesting counted into *deepest; returns the text after
 * it, or p when it stays in the envelope (small, ragged, not finite:
 * Jansson and the codec read it), or NULL when out of memory. */
static const char *lift_array(const char *p, const char *end, char **o, blob_vec *bv, srv_arena *a,
                              size_t *walk, int depth, int *deepest)
{
    srv_blob *b = blob_push(bv);
    if (!b)
        return NULL;
    const char *stop = srv_body_array(p, b); /* parsed while the body came */
    if (!stop)
        stop = (size_t)(end - p) >= SPLIT_MIN_TEXT ? parse_split(p, end, b, walk)
                                                   : parse_array(p, end, b, PART_ALL);
    if (stop && (stop - p >= MIN_ARRAY_TEXT || has_long_integer(p, stop))) {
        if (depth + b->rank > *deepest) /* its brackets nest rank deep */
            *deepest = depth + b->rank;
        if (srv_arena_adopt(a, b->data) != 0) {
            free(b->data);
            return NULL;
        }
        b->text = p;
        b->text_len = (size_t)(stop - p);
        *o = put_placeholder(*o, 't', bv->n - 1);
        return stop;
    }
    if (stop) /* small: Jansson reads it as cheaply */
        free(b->data);
    bv->n--; /* leave it to the slow path */
    return p;
}

/* At an integer after a ':' (p at its first digit): one past Jansson's
 * int64, which Jansson refuses as "too big", goes into the envelope at *o
 * as its digits in a placeholder (a seed takes up to 2^64 - 1; a number
 * field reads the float they make: srv_json_digits); returns the text
 * after it, or p for any other number. */
static const char *lift_big_integer(const char *p, const char *end, char **o)
{
    const char *q = p;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    size_t nd = (size_t)(q - p);
    int big = nd > 19 || (nd == 19 && memcmp(p, "9223372036854775807", 19) > 0);
    if (!big || (q < end && (*q == '.' || *q == 'e' || *q == 'E')))
        return p;
    *o += sprintf(*o, "{\"\\u0001u\":\"%.*s\"}", (int)nd, p);
    return q;
}

static int is_number_char(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* At a number left in the envelope (p at its first byte): a scalar, or one
 * of an array too short to lift. Jansson reads it as a double, which the
 * codec rounds to float32; rounding twice gives the wrong float when the
 * double lands on a midpoint between two floats that the text is beside,
 * not at (1 in 2^29 of 17-digit numbers). Such a number is written as its
 * correctly rounded float's "%.9g", which no double rounding moves; any
 * other is copied. An integer is Jansson's exact int64, converted once
 * (one past int64, which Jansson refuses as "too big", gets ".0": a real);
 * text of 9 bytes or fewer without an exponent is never beside a midpoint
 * (numparse.h's srv_parse_short shows why). The rewrite must keep the
 * envelope within twice the text read (o_max): otherwise, never seen, the
 * text is kept. Returns the text after the number. */
static const char *copy_number(const char *p, const char *end, char **o, const char *o_max)
{
    const char *q = p;
    int point = 0, expo = 0;
    for (; q < end && is_number_char(*q); q++) {
        point |= *q == '.';
        expo |= *q == 'e' || *q == 'E';
    }
    size_t n = (size_t)(q - p);
    int plain = !point && !expo;
    int big = plain && n >= 19 && has_long_integer(p, q); /* past int64 */
    if (big || (!plain && (n > 9 || expo))) {
        float f;
        int finite;
        char *r;
        double d = strtod(p, &r); /* glibc's: correctly rounded */
        if (srv_parse_float(p, q, &f, &finite) == q && r == q && finite && (float)d != f) {
            char t[24];
            size_t tn = srv_fmt_float(f, t);
            if (*o + tn <= o_max + 2 * n) {
                memcpy(*o, t, tn);
                *o += tn;
                return q;
            }
        }
    }
    memcpy(*o, p, n);
    *o += n;
    if (big) { /* Jansson refuses it as "too big", and reads "x.0" as the double it is */
        memcpy(*o, ".0", 2);
        *o += 2;
    }
    return q;
}

int srv_scan(const char *body, size_t len, srv_arena *a, srv_scan_result *out)
{
    const char *p = body, *end = body + len;
    memset(out, 0, sizeof *out);
    /* Placeholders are shorter than what they replace, except for a big
     * integer's (14 bytes more than its 19 digits or more, and the ':'
     * before them) and
     * a rewritten number's (copy_number keeps it within twice its text):
     * the envelope is at most twice the body. Untouched pages cost nothing. */
    if (len > (SIZE_MAX - 64) / 2)
        return -1;
    char *env = srv_arena_alloc(a, 2 * len + 64);
    if (!env)
        return -1;
    char *o = env;
    blob_vec bv = {0};
    int after_colon = 0;
    int depth = 0, deepest = 0; /* counted as srv_json_too_deep does */
    size_t walk = 2 * len;       /* array_end's budget: a body's arrays are walked twice */
    while (p < end) {
        char c = *p;
        if (c == '"') {
            int rc = scan_string(&p, end, &o, &bv, after_colon, &out->reserved);
            if (rc < 0)
                goto oom;
            if (rc > 0)
                break;
            after_colon = 0;
            continue;
        }
        if (after_colon && (c == '[' || (c >= '1' && c <= '9'))) {
            const char *q = c == '[' ? lift_array(p, end, &o, &bv, a, &walk, depth, &deepest)
                                     : lift_big_integer(p, end, &o);
            if (!q)
                goto oom;
            if (q != p) {
                p = q;
                after_colon = 0;
                continue;
            }
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            p = copy_number(p, end, &o, env + 2 * (size_t)(p - body) + 64);
            after_colon = 0;
            continue;
        }
        if (c == '[' || c == '{') {
            out->values++;
            if (++depth > deepest)
                deepest = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',') {
            out->values++;
        }
        if (!srv_json_ws(c))
            after_colon = c == ':';
        *o++ = c;
        p++;
    }
    *o = '\0';
    out->depth = deepest;
    out->envelope = env;
    out->envelope_len = (size_t)(o - env);
    if (bv.n) {
        out->blobs = srv_arena_alloc(a, bv.n * sizeof *bv.v);
        if (!out->blobs)
            goto oom;
        memcpy(out->blobs, bv.v, bv.n * sizeof *bv.v);
        out->n_blobs = bv.n;
    }
    free(bv.v);
    return 0;
oom:
    free(bv.v);
    return -1;
}

const srv_blob *srv_blob_of(const srv_scan_result *sr, json_t *j)
{
    if (!sr || !json_is_object(j) || json_object_size(j) != 1)
        return NULL;
    json_t *ix = json_object_get(j, "\x01t");
    int want_string = 0;
    if (!ix) {
        ix = json_object_get(j, "\x01s");
        want_string = 1;
    }
    if (!json_is_integer(ix))
        return NULL;
    json_int_t i = json_integer_value(ix);
    if (i < 0 || (uint64_t)i >= sr->n_blobs || sr->blobs[i].is_string != want_string)
        return NULL;
    return &sr->blobs[i];
}

const char *srv_json_digits(const json_t *j)
{
    json_t *s = json_is_object(j) && json_object_size(j) == 1 ? json_object_get(j, "\x01u") : NULL;
    return json_is_string(s) ? json_string_value(s) : NULL;
}

int srv_json_int(const json_t *j, int64_t *out)
{
    if (json_is_integer(j)) {
        *out = json_integer_value(j);
        return 0;
    }
    if (!srv_json_digits(j))
        return -1;
    *out = INT64_MAX;
    return 1;
}

int srv_json_u64(json_t *j, uint64_t *out)
{
    if (json_is_integer(j)) {
        if (json_integer_value(j) < 0)
            return -1;
        *out = (uint64_t)json_integer_value(j);
        return 0;
    }
    const char *p = srv_json_digits(j);
    if (!p)
        return -1;
    uint64_t v = 0;
    for (; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Bytes of x equal to the byte in every lane of pat get their high bit
 * set; the lowest set one is exact (a borrow may flag bytes above it). */
static uint64_t bytes_eq(uint64_t x, uint64_t pat)
{
    uint64_t v = x ^ pat;
    return (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
}

/* Offset of the first byte in body[i..len) that matters to the depth
 * count ('"', '[', ']', '{', '}'), eight bytes a step: a body is mostly
 * digits, and a byte loop over them cost as much as parsing them. */
static size_t next_structural(const char *body, size_t i, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (len - i >= 8) {
        uint64_t x;
        memcpy(&x, body + i, 8);
        uint64_t lo = x | 0x2020202020202020ull; /* '[' -> '{', ']' -> '}' */
        uint64_t hit = bytes_eq(lo, 0x7b7b7b7b7b7b7b7bull) | bytes_eq(lo, 0x7d7d7d7d7d7d7d7dull) |
                       bytes_eq(x, 0x2222222222222222ull);
        if (hit)
            return i + (size_t)(__builtin_ctzll(hit) >> 3);
        i += 8;
    }
#endif
    return i;
}

int srv_json_not_object(const char *body, size_t len)
{
    size_t i = 0;
    while (i < len && srv_json_ws(body[i]))
        i++;
    return i < len && body[i] != '{';
}

int srv_json_too_deep(const char *body, size_t len, int max_depth)
{
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        i = next_structural(body, i, len);
        if (i >= len)
            break;
        char c = body[i];
        if (c == '"') {
            /* Jump to the closing quote with memchr: base64 tensors are
             * megabytes of string, and a byte loop over them cost more than
             * decoding them. A quote ends the string unless an odd run of
             * backslashes precedes it (the opening quote bounds the run). */
            size_t open = i;
            for (;;) {
                const char *q = memchr(body + i + 1, '"', len - i - 1);
                if (!q)
                    return 0; /* unterminated: the parser reports it */
                i = (size_t)(q - body);
                size_t bs = 0;
                while (i - bs - 1 > open && body[i - bs - 1] == '\\')
                    bs++;
                if (bs % 2 == 0)
                    break;
            }
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}
