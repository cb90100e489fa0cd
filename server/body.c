/* body.c - a request body as it arrives: held in one buffer sized from its
 * Content-Length, and each long string in it decoded as base64 (its floats
 * checked for Inf and NaN) while the chunks arrive and are still in cache,
 * so the codec takes the bytes (srv_body_decoded) instead of reading
 * megabytes of text again after the whole body is in.
 *
 * The tokenizer below only finds strings; it never judges the JSON. What
 * it records is "the text body[off, off + len) decodes to these bytes", a
 * fact about those bytes alone: the codec uses an entry only when the
 * string the real parser found is exactly that range, so a body that
 * confuses the tokenizer costs the work, never a wrong tensor. Text and
 * decoded bytes come from srv_big_alloc: a large body's are kept for the
 * next large body (no page faults) when it is freed. */
#include "srv.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE_MIN ((size_t)4096) /* characters of a string before it is decoded as it comes */

static _Thread_local const srv_body *current;

/* ------------------------------------------------------------ the body */

void srv_body_init(srv_body *b, size_t expect, size_t max, int decode)
{
    memset(b, 0, sizeof *b);
    b->expect = expect;
    b->max = max;
    b->decode = decode && expect >= LIVE_MIN; /* a smaller body has no long string */
    b->bad = -1;
}

void srv_body_align(srv_body *b, size_t at)
{
    b->align_at = at;
}

static void early_free(srv_body *b);

void srv_body_free(srv_body *b)
{
    early_free(b); /* first: a parse may still read the text */
    srv_big_free(b->text ? b->text - b->lead : NULL); /* kept for the next large body */
    srv_big_free(b->area);
    free(b->strs);
    srv_body_init(b, 0, b->max, 0);
}

/* Room for n more characters and the NUL: the Content-Length at once, else
 * doubling from 64 KiB, never past max + 1. */
static int text_room(srv_body *b, size_t n)
{
    size_t need = b->len + n + 1; /* the caller keeps len + n <= max */
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : b->expect ? b->expect + 1 : n ? (size_t)65536 : 1;
    while (cap < need && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (cap < need)
        cap = need;
    if (cap > b->max + 1)
        cap = b->max + 1 > need ? b->max + 1 : need;
    if (!b->text && cap >= SRV_BIG_MIN) {
        size_t lead = (64 - b->align_at % 64) % 64; /* srv_big_alloc's blocks are 64-aligned */
        char *p = srv_big_alloc(cap + lead, &b->cap);
        if (!p)
            return -1;
        b->text = p + lead;
        b->lead = lead;
        b->cap -= lead;
        b->fin_on = b->align_at > 0 && b->align_at < b->expect;
        return 0;
    }
    char *p = realloc(b->text ? b->text - b->lead : NULL, cap + b->lead);
    if (!p)
        return -1;
    b->text = p + b->lead; /* the alignment is lost: the reader copies then */
    b->cap = cap;
    b->fin_on = 0;
    return 0;
}

/* The decoded area, once: room for everything a body of Content-Length
 * bytes can decode to, each string 64-byte aligned (as the arena's blocks
 * are: the kernels read rows with aligned loads). Only long strings get an
 * entry, so there are at most expect / LIVE_MIN of them. */
static int area_ready(srv_body *b)
{
    if (b->area)
        return 0;
    if (b->no_area)
        return -1;
    size_t cap = b->expect / 4 * 3 + (b->expect / LIVE_MIN + 2) * 64;
    if (!(b->area = srv_big_alloc(cap, &b->area_cap))) {
        b->no_area = 1;
        return -1;
    }
    return 0;
}

/* Checks the floats decoded since the last check (while in cache): whole
 * blocks of 1024, which srv_first_nonfinite checks vectorised (a chunk's
 * ragged end waits for the next chunk), and the rest once final. */
static void check_floats(srv_body *b, int final)
{
    size_t first = b->checked, n = b->s_n / 4 - first;
    if (!final)
        n -= n % 1024;
    if (b->bad >= 0 || !n)
        return;
    int64_t i = srv_first_nonfinite(b->area + b->s_out + first * 4, (int64_t)n);
    if (i >= 0)
        b->bad = (int64_t)first + i;
    b->checked = first + n;
}

/* Decodes the current string's characters up to text[limit) (whole quads
 * only unless final: the closing quote is at limit). A string that is not
 * valid base64 stops being decoded; the codec finds and words the error. */
static void decode_run(srv_body *b, size_t limit, int final)
{
    size_t from = b->s_off + b->s_done, k = limit - from;
    if (!final)
        k -= k % 4;
    else if ((limit - b->s_off) % 4)
        k = SIZE_MAX; /* not a whole number of quads: give up below */
    if (k == SIZE_MAX || (k && b->padded) || k / 4 * 3 > b->area_cap - b->s_out - b->s_n) {
        b->live = 0;
        return;
    }
    if (!k) {
        if (final) /* all came through fast_run: the ragged end is left */
            check_floats(b, 1);
        return;
    }
    uint8_t *o = b->area + b->s_out + b->s_n;
    int64_t n = srv_b64_decode(b->text + from, k, o);
    if (n < 0) {
        b->live = 0;
        return;
    }
    b->padded = n != (int64_t)(k / 4 * 3); /* padding: nothing may follow */
    b->s_done += k;
    b->s_n += (size_t)n;
    check_floats(b, final);
}

/* Decodes the whole quads that have come, without looking for the closing
 * quote first: the decoder refuses '"' and '\\' (neither is a base64
 * letter), so when it takes them all, none is among them. Returns 0 when
 * it did not (the quote, padding or a bad letter is there; the careful
 * path looks), 1 when it did and text[pos] moved on. */
static int fast_run(srv_body *b)
{
    size_t from = b->s_off + b->s_done, k = (b->len - from) / 4 * 4;
    if (!k || b->padded || k / 4 * 3 > b->area_cap - b->s_out - b->s_n)
        return 0;
    int64_t n = srv_b64_decode(b->text + from, k, b->area + b->s_out + b->s_n);
    if (n != (int64_t)(k / 4 * 3))
        return 0;
    b->s_done += k;
    b->s_n += (size_t)n;
    check_floats(b, 0);
    b->pos = from + k;
    return 1;
}

/* Starts decoding the current string (enough of it has come). */
static void go_live(srv_body *b)
{
    b->tried = 1;
    if (b->n_strs == b->strs_cap) {
        size_t cap = b->strs_cap ? b->strs_cap * 2 : 8;
        srv_body_str *p = realloc(b->strs, cap * sizeof *p);
        if (!p)
            return;
        b->strs = p;
        b->strs_cap = cap;
    }
    if (area_ready(b) != 0)
        return;
    size_t out = (b->area_used + 63) & ~(size_t)63;
    if (out > b->area_cap)
        return;
    b->live = 1;
    b->s_out = out;
    b->s_done = b->s_n = b->checked = 0;
    b->padded = 0;
    b->bad = -1;
}

/* The current string ends at text[q]: a decoded one gets its entry. */
static void end_string(srv_body *b, size_t q)
{
    if (!b->tried && q - b->s_off >= LIVE_MIN)
        go_live(b);
    if (b->live)
        decode_run(b, q, 1);
    if (b->live) {
        srv_body_str *s = &b->strs[b->n_strs++];
        s->off = b->s_off;
        s->len = q - b->s_off;
        s->out = b->s_out;
        s->n = (int64_t)b->s_n;
        s->bad = b->bad;
        b->area_used = b->s_out + b->s_n;
    }
    b->in_str = b->live = b->tried = b->esc = b->slow = 0;
}

static void track_arrays(srv_body *b, size_t from, size_t limit, int string_next);

/* Tokenizes text[pos, len): strings found, long ones decoded, and the text
 * between them followed for long arrays (track_arrays). */
static void tokenize(srv_body *b)
{
    const char *t = b->text;
    while (b->pos < b->len) {
        if (!b->in_str) {
            const char *q = memchr(t + b->pos, '"', b->len - b->pos);
            track_arrays(b, b->pos, q ? (size_t)(q - t) : b->len, q != NULL);
            if (!q) {
                b->pos = b->len;
                return;
            }
            b->in_str = 1;
            b->pos = b->s_off = (size_t)(q - t) + 1;
            continue;
        }
        if (b->slow) { /* a string with escapes: walked, never decoded */
            char c = t[b->pos++];
            if (b->esc)
                b->esc = 0;
            else if (c == '\\')
                b->esc = 1;
            else if (c == '"')
                end_string(b, b->pos - 1);
            continue;
        }
        if (b->live && fast_run(b))
            continue;
        const char *q = memchr(t + b->pos, '"', b->len - b->pos);
        size_t limit = q ? (size_t)(q - t) : b->len;
        const char *bs = memchr(t + b->pos, '\\', limit - b->pos);
        if (bs) {
            b->live = 0;
            b->slow = 1;
            b->pos = (size_t)(bs - t);
            continue;
        }
        if (q) {
            end_string(b, limit);
            b->pos = limit + 1;
            continue;
        }
        if (!b->tried && limit - b->s_off >= LIVE_MIN)
            go_live(b);
        if (b->live)
            decode_run(b, limit, 0);
        b->pos = limit;
    }
}

/* The binary section's floats checked for Inf and NaN in blocks of 16 KiB
 * as they come, while in cache (srv_body_finite_prefix), until a block has
 * one: the reader then finds which (an error, so no hurry). */
#define FIN_BLOCK ((size_t)16 << 10)

static void check_binary(srv_body *b)
{
    while (b->fin_on && !b->fin_stop && b->len - b->align_at - b->fin_done >= FIN_BLOCK) {
        if (srv_first_nonfinite(b->text + b->align_at + b->fin_done, (int64_t)(FIN_BLOCK / 4)) >= 0)
            b->fin_stop = 1;
        else
            b->fin_done += FIN_BLOCK;
    }
}

/* ------------------------------------------------------------ arrays parsed early */

/* A long array (EARLY_MIN bytes of text or more) whose last ']' comes
 * while the body arrives slower than a thread parses, with enough still to
 * come to hide at least half of the array's parse, is parsed then, on a
 * kept thread (tasks.c): its parse overlaps the rest of the upload instead
 * of following it. A body that comes faster (a client on this machine)
 * leaves no core idle, and there a parse of one array on one thread would
 * only take a core from the upload and lose the scanner's two-thread
 * split. srv_scan takes the tensor when it reaches the array's '['
 * (srv_body_array). As with the strings, an entry is a fact about its
 * bytes alone: "the text at p parses to this tensor, ending at stop"
 * (srv_scan_array, the scanner's own parse, reading nothing past the
 * array), so a tracker misled by hostile text costs work, never a wrong
 * tensor. A body has one such parse at a time, and the server EARLY_MAX.
 * A body freed while its parse runs (its client gone) waits for it:
 * EARLY_MAX_TEXT bounds that wait, some 12 ms on one core. */
#define EARLY_MIN ((size_t)256 << 10)
#define EARLY_MAX_TEXT ((size_t)16 << 20)
#define EARLY_MAX 4

struct srv_body_early {
    const char *p, *end;        /* the text, as the tracker found it */
    const char *stop;           /* the parse's end; NULL: refused */
    srv_blob blob;              /* the parse's tensor, until taken */
    srv_task task;
    atomic_int done;            /* the parse returned */
    int settled;
    struct srv_body_early *next;
};

double srv_body_parse_rate = 1.0;

static atomic_int early_running;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Whether the upload, at the rate it has come so far, leaves a core idle
 * for long enough to hide half of parsing n bytes: it comes slower than
 * srv_body_parse_rate, and the rest takes at least half the parse. */
static int early_pays(const srv_body *b, size_t n, size_t rest)
{
    double ns = now_ns() - b->t_first, rate = (double)b->len / (ns > 1 ? ns : 1);
    return rate < srv_body_parse_rate && (double)rest / rate >= (double)n / srv_body_parse_rate / 2;
}

static atomic_long early_parsed, early_taken;

void srv_body_early_counts(long *parsed, long *taken)
{
    *parsed = atomic_load(&early_parsed);
    *taken = atomic_load(&early_taken);
}

static void early_parse(void *arg)
{
    struct srv_body_early *e = arg;
    e->stop = srv_scan_array(e->p, e->end, &e->blob);
    atomic_fetch_add(&early_parsed, 1);
    atomic_fetch_sub(&early_running, 1);
    atomic_store_explicit(&e->done, 1, memory_order_release);
}

/* Waits for e's parse (or withdraws it): afterwards stop and blob are
 * final, and stop is NULL unless the parse ran and took the array. */
static void early_settle(struct srv_body_early *e)
{
    if (e->settled)
        return;
    e->settled = 1;
    if (!srv_task_settle(&e->task)) /* never ran: stop is still NULL */
        atomic_fetch_sub(&early_running, 1);
}

void srv_body_early_wait(const srv_body *b)
{
    for (struct srv_body_early *e = b->early; e; e = e->next)
        while (!e->settled && !atomic_load_explicit(&e->done, memory_order_acquire))
            sched_yield(); /* a queued task has its thread (tasks.c): it runs */
}

static void early_free(srv_body *b)
{
    struct srv_body_early *e = b->early;
    while (e) {
        struct srv_body_early *next = e->next;
        early_settle(e);
        if (e->stop)
            free(e->blob.data);
        free(e);
        e = next;
    }
    b->early = b->early_last = NULL;
}

/* The array text[start, end) closed while rest bytes are still to come:
 * parsed now, when worth it and allowed. One that closes while the body's
 * last early parse still runs waits for it (wait_start, wait_end; one
 * such, a later one is left to the scanner), and is looked at again as
 * more of the body comes (early_retry). */
static void early_start(srv_body *b, size_t start, size_t end, size_t rest)
{
    struct srv_body_early *last = b->early_last;
    if (end - start < EARLY_MIN || end - start > EARLY_MAX_TEXT || !early_pays(b, end - start, rest))
        return;
    if (last && !atomic_load_explicit(&last->done, memory_order_acquire)) {
        if (!b->wait_end) {
            b->wait_start = start;
            b->wait_end = end;
        }
        return;
    }
    if (atomic_fetch_add(&early_running, 1) >= EARLY_MAX) {
        atomic_fetch_sub(&early_running, 1);
        return;
    }
    struct srv_body_early *e = calloc(1, sizeof *e);
    if (e) {
        e->p = b->text + start;
        e->end = b->text + end;
        atomic_init(&e->done, 0);
    }
    if (!e || srv_task_start(&e->task, early_parse, e, 1) != 0) {
        atomic_fetch_sub(&early_running, 1);
        free(e);
        return;
    }
    if (last)
        last->next = e;
    else
        b->early = e;
    b->early_last = e;
}

/* The waiting array, once the parse before it has ended. */
static void early_retry(srv_body *b)
{
    struct srv_body_early *last = b->early_last;
    if (!b->wait_end || !atomic_load_explicit(&last->done, memory_order_acquire))
        return;
    size_t start = b->wait_start, end = b->wait_end;
    b->wait_end = 0;
    early_start(b, start, end, b->expect - b->len);
}

enum { A_IDLE, A_OPEN, A_ROW, A_CLOSE }; /* the tracker's states */

/* Whether the last byte before text[i] other than whitespace is ':'. */
static int after_colon(const char *t, size_t i)
{
    while (i > 0 && srv_json_ws(t[i - 1]))
        i--;
    return i > 0 && t[i - 1] == ':';
}

/* The tracker moved to the next ch before limit (1), or to limit (0). */
static int seek(srv_body *b, char ch, size_t limit)
{
    const char *o = memchr(b->text + b->a_pos, ch, limit - b->a_pos);
    b->a_pos = o ? (size_t)(o - b->text) : limit;
    return o != NULL;
}

/* Follows text[from, limit), which is outside strings (tokenize's), for
 * arrays after a ':', from '[' to ']' runs as scan.c's array_end does
 * (memchr from ']' to ']': in a regular array a '[' only follows '[' or
 * ','), and hands each that closes to early_start. An array a string
 * begins in (string_next: one does at limit) is not one of numbers. */
static void track_arrays(srv_body *b, size_t from, size_t limit, int string_next)
{
    const char *t = b->text;
    size_t rest = b->expect - b->len;
    if (b->a_pos < from) /* past a string */
        b->a_pos = from;
    while (b->a_pos < limit) {
        char c = t[b->a_pos];
        switch (b->a_state) {
        case A_IDLE:
            if (!seek(b, '[', limit))
                continue;
            if (after_colon(t, b->a_pos)) {
                b->a_start = b->a_pos;
                b->a_depth = 0;
                b->a_state = A_OPEN;
            } else {
                b->a_pos++;
            }
            break;
        case A_OPEN: /* '[' and whitespace, then a row's numbers */
            if (c == '[') {
                if (++b->a_depth > ATTN_MAX_RANK)
                    b->a_state = A_IDLE;
            } else if (!srv_json_ws(c)) {
                b->a_state = A_ROW;
                break;
            }
            b->a_pos++;
            break;
        case A_ROW:
            if (!seek(b, ']', limit))
                continue;
            b->a_state = A_CLOSE;
            break;
        default: /* A_CLOSE: ']' and whitespace, then ',' or the end */
            if (c == ']') {
                b->a_pos++;
                if (--b->a_depth == 0) {
                    b->a_state = A_IDLE;
                    early_start(b, b->a_start, b->a_pos, rest);
                }
            } else if (c == ',') {
                b->a_pos++;
                b->a_state = A_OPEN;
            } else if (srv_json_ws(c)) {
                b->a_pos++;
            } else {
                b->a_state = A_IDLE; /* not a regular array */
            }
        }
    }
    if (string_next)
        b->a_state = A_IDLE;
}

const char *srv_body_array(const char *p, srv_blob *out)
{
    const srv_body *b = current;
    struct srv_body_early *e = b ? b->early : NULL;
    while (e && e->p < p)
        e = e->next;
    if (!e || e->p != p)
        return NULL;
    early_settle(e);
    const char *stop = e->stop;
    /* The floats are copied into this thread's memory: a kept thread's
     * malloc'd block would go back to that thread's heap when the request
     * frees it, and this thread's next large buffers would then come from
     * pages never touched, each first touch a fault (a 10 MB JSON answer
     * took 30 ms more to write on this VM). A copy is 0.1 ms a 2 MB. */
    float *data = stop ? malloc((size_t)(e->blob.count ? e->blob.count : 1) * sizeof *data) : NULL;
    if (!data)
        return NULL;
    memcpy(data, e->blob.data, (size_t)e->blob.count * sizeof *data);
    *out = e->blob;
    out->data = data;
    free(e->blob.data);
    e->stop = NULL; /* taken: early_free has nothing to free */
    atomic_fetch_add(&early_taken, 1);
    return stop;
}

int srv_body_append(srv_body *b, const char *p, size_t n)
{
    if (text_room(b, n) != 0)
        return -1;
    if (!b->len && b->decode)
        b->t_first = now_ns();
    memcpy(b->text + b->len, p, n);
    b->len += n;
    if (b->decode) {
        tokenize(b);
        early_retry(b);
    }
    if (b->fin_on && b->len > b->align_at)
        check_binary(b);
    return 0;
}

size_t srv_body_finite_prefix(const char *p)
{
    const srv_body *b = current;
    if (!b || !b->fin_on || !b->text || p < b->text + b->align_at)
        return 0;
    size_t off = (size_t)(p - (b->text + b->align_at));
    return off % 4 == 0 && off < b->fin_done ? b->fin_done - off : 0;
}

int srv_body_finish(srv_body *b)
{
    if (text_room(b, 0) != 0)
        return -1;
    b->text[b->len] = '\0';
    return 0;
}

void srv_body_use(const srv_body *b) { current = b; }

/* The current body's entry for the string whose text starts at s, or NULL. */
static const srv_body_str *entry_at(const char *s)
{
    const srv_body *b = current;
    if (!b || !b->n_strs || s < b->text || (size_t)(s - b->text) > b->len)
        return NULL;
    size_t off = (size_t)(s - b->text), lo = 0, hi = b->n_strs;
    while (lo < hi) { /* entries are in text order */
        size_t mid = lo + (hi - lo) / 2;
        if (b->strs[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->n_strs && b->strs[lo].off == off ? &b->strs[lo] : NULL;
}

int srv_body_decoded(const char *s, size_t len, uint8_t **data, int64_t *n, int64_t *bad)
{
    const srv_body_str *e = entry_at(s);
    if (!e || e->len != len)
        return 0;
    *data = current->area + e->out;
    *n = e->n;
    *bad = e->bad;
    return 1;
}

size_t srv_body_string_len(const char *s)
{
    const srv_body_str *e = entry_at(s);
    return e ? e->len : 0;
}
