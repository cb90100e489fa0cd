/* internal.h - internal: what the library's own files share (error helpers,
 * validated dimensions, mask views, the row-by-row attention driver). */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include <stdarg.h>
#include "attn.h"
#include "kernels.h"

#if defined(__GNUC__)
#define ATTN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ATTN_PRINTF(f, a)
#endif

/* ---------------------------------------------------------- status.c */

/* Fills err (when not NULL) and returns st, so a failure is one line. */
attn_status attn_fail(attn_error *err, attn_status st, const char *field,
                      const char *fmt, ...) ATTN_PRINTF(4, 5);

/* Writes "(2, 3, 4)" into buf. */
void attn_fmt_shape(char *buf, size_t n, int rank, const int64_t *shape);

/* Element count of a shape, overflow-checked (also against size_t bytes
 * of float). Returns 0 on overflow. */
int attn_count(int rank, const int64_t *shape, int64_t *out);

/* ----------------------------------------------------------- ctx.c */

struct attn_ctx {
    int threads;
    void *arena;     /* grow-only scratch */
    size_t cap;
};

/* Scratch of at least bytes from ctx's arena (64-byte aligned), valid
 * until the next call on ctx. NULL when out of memory. */
void *attn_ctx_scratch(attn_ctx *ctx, size_t bytes);

/* Bytes that n items of `each` bytes take in a workspace: rounded up to
 * 64, in double so that no product of sizes can overflow. */
double attn_ws_bytes(double n, size_t each);

/* A workspace of `bytes` (a sum of attn_ws_bytes) from ctx into *at:
 * ATTN_ERR_TOO_LARGE past what a size_t can hold exactly, ATTN_ERR_NOMEM
 * when it cannot be allocated. */
attn_status attn_ws_get(attn_ctx *ctx, double bytes, char **at, attn_error *err);

/* The next piece of n items of `each` bytes from a workspace cursor, as
 * planned with attn_ws_bytes (the cursor moves past it). */
void *attn_ws_take(char **at, int64_t n, size_t each);

/* The context a public call runs with: ctx itself, or (ctx NULL) a new
 * one-thread context also stored in *own, which the caller frees with
 * attn_ctx_free. NULL when out of memory. */
attn_ctx *attn_ctx_for_call(attn_ctx *ctx, attn_ctx **own);

/* ---------------------------------------------------------- shape.c */

/* Validated sizes of a request; B = 1 when not batched. */
typedef struct {
    int batched;
    int64_t B, Lq, Dq, Lk, Dk, Lv, Dv;
} attn_dims;

/* query/key/value ranks, batch agreement, non-empty dims, data present;
 * fills d (Lv is value's rows, which the caller compares with Lk or not). */
attn_status attn_check_qkv(const attn_tensor *q, const attn_tensor *k,
                           const attn_tensor *v, attn_dims *d, attn_error *err);

/* Masks, bias, window and hard against B, H (0 = not multi-head), Lq, Lk;
 * lk is the symbol for the key count in messages ("Lk", or "Lv"). */
/* hidden_size and output_size: 0 (the default, Dq) or positive. */
attn_status attn_check_sizes(int64_t hidden_size, int64_t output_size, attn_error *err);

attn_status attn_check_options(const attn_options *o, int64_t B, int64_t H,
                               int64_t Lq, int64_t Lk, const char *lk, attn_error *err);

/* Elements of the n tensors p[i] that are not NULL, summed in double. */
double attn_tensors_floats(const attn_tensor *const *p, size_t n);

/* A named parameter lookup: returns the tensor or NULL. */
const attn_tensor *attn_find_param(const attn_named *p, size_t n, const char *name);

/* Checks t has exactly the given shape; otherwise ATTN_ERR_SHAPE naming
 * field "params.<name>" and the expected shape with its symbols. */
attn_status attn_check_param_shape(const char *name, const attn_tensor *t,
                                   int rank, const int64_t *shape,
                                   const char *symbols, const char *who,
                                   attn_error *err);

/* Mask views of one (batch, head) slice, in the form attn_sdpa_job uses. */
typedef struct {
    const uint8_t *mask; int64_t mask_stride;
    const uint8_t *key_mask;
    const float *bias; int64_t bias_stride;
    int causal;
    int64_t window; /* < 0: none */
} attn_row_masks;

void attn_masks_at(const attn_options *o, int64_t b, int64_t h, int64_t H,
                   int64_t Lq, int64_t Lk, attn_row_masks *m);

/* --------------------------------------------------------- softmax.c */

/* Row i of attention: s holds the raw scores (lk floats) and is
 * overwritten; w receives the weights. tmp is lk floats of scratch.
 * Applies bias and masks, a max-subtracted softmax over allowed keys
 * (all zero when none), then hard attention. */
void attn_row_softmax(float *s, int64_t i, int64_t lk, const attn_row_masks *m,
                      attn_hard hard, int64_t top_k, float *w, float *tmp);

/* ------------------------------------------------------------ rows.c */

/* One slice (batch or batch x head) of attention computed row by row, for
 * rules whose scores are not a plain dot product (or with hard attention). */
typedef enum {
    ATTN_SCORE_DOT,     /* scale * a_i . b_j over d */
    ATTN_SCORE_TANH,    /* sum_h vw[h] * tanh(a_i[h] + b_j[h]) over d (vw NULL: ones) */
    ATTN_SCORE_GIVEN    /* a_i is the row of scores itself */
} attn_score_kind;

typedef struct {
    attn_score_kind kind;
    int64_t lq, lk, d, dv;
    const float *a; int64_t a_stride;
    const float *b; int64_t b_stride;
    const float *vw;
    float scale;
    const float *v; int64_t v_stride;
    float *o; int64_t o_stride;
    float *w; int64_t w_stride; /* NULL: weights not kept */
    attn_row_masks m;
    attn_hard hard;
    int64_t top_k;
} attn_row_job;

/* Runs n jobs (all with the same lq and lk) on up to threads threads, in
 * scratch of attn_rows_scratch_bytes(jobs, n, threads) bytes (64-byte
 * aligned). */
attn_status attn_rows_run(const attn_row_job *jobs, size_t n, int threads, void *scratch,
                          attn_error *err);

/* Bytes of scratch attn_rows_run needs; SIZE_MAX when that overflows. */
size_t attn_rows_scratch_bytes(const attn_row_job *jobs, size_t n, int threads);

/* attn_rows_run with its scratch from the heap (scratch_heap.c). */
attn_status attn_rows_run_heap(const attn_row_job *jobs, size_t n, int threads,
                               attn_error *err);

/* ------------------------------------------------------------ seed.c */

/* A float in [-bound, bound) drawn as documented in attn.h. */
float attn_seed_uniform(uint64_t *state, float bound);

/* One parameter to draw: a Linear weight/bias (uniform, bound
 * 1/sqrtf(fan_in)) or a LayerNorm weight (ones) / bias (zeros). */
typedef enum { ATTN_INIT_UNIFORM, ATTN_INIT_ONES, ATTN_INIT_ZEROS } attn_init;

typedef struct {
    const char *name; /* static string */
    int rank;
    int64_t shape[2];
    int64_t fan_in;
    attn_init init;
} attn_seed_spec;

#define ATTN_SEED_MAX 10 /* specs of the largest set (multi-head with norm) */

/* Floats of the specs' tensors, summed in double (no overflow). */
double attn_seed_floats(const attn_seed_spec *specs, size_t n);

/* Floats attn_seed_params makes for rule at sizes d, hidden size dh and
 * output size dout (0 for an unknown rule); allocates nothing. */
double attn_rule_seed_floats(attn_rule rule, const attn_dims *d, int64_t dh, int64_t dout);

/* Draws the specs in order from one SplitMix64 stream into a new set (one
 * allocation). */
attn_status attn_seed_build(const attn_seed_spec *specs, size_t n, uint64_t seed,
                            attn_param_set **out, attn_error *err);

#endif /* ATTN_INTERNAL_H */
