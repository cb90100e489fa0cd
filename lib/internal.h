/* internal.h - internal: what the library's own files share (error helpers,
 * validated dimensions, mask views, the row-by-row attention driver). */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include <math.h>
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

/* "params.<name>" in buf (64 bytes), returned: the field of a parameter
 * for attn_fail. ATTN_PARAM_FIELD gives it a buffer of its own. */
const char *attn_param_field(char *buf, const char *name);
#define ATTN_PARAM_FIELD(name) attn_param_field((char[64]){0}, (name))

/* Writes "(2, 3, 4)" into buf. */
void attn_fmt_shape(char *buf, size_t n, int rank, const int64_t *shape);

/* Element count of a shape, overflow-checked (also against size_t bytes
 * of float). Returns 0 on overflow. */
int attn_count(int rank, const int64_t *shape, int64_t *out);

/* ----------------------------------------------------------- ctx.c */

/* The regions of a context's workspace: the pieces a call lays out
 * (exec.c), the kernels' scratch, and the rotary table (rope.c), which
 * outlives the call (attn_rope_key says what it holds). */
enum { ATTN_WS_PIECES, ATTN_WS_KERNELS, ATTN_WS_ROPE, ATTN_REGIONS };

/* What region ATTN_WS_ROPE holds: npos rows of positions first.., for
 * rope base, style and dims on heads of hd features; valid 0: nothing. */
typedef struct {
    int valid, style;
    float base;
    int64_t dims, hd, npos;
    double first;
} attn_rope_key;

typedef struct {
    void *mem;   /* 64-byte aligned */
    size_t cap;  /* bytes */
    size_t peak; /* the most bytes asked so far (what attn_shapes.scratch_bytes foretells) */
} attn_region;

struct attn_pool;

struct attn_ctx {
    int threads;
    struct attn_pool *pool; /* its workers; NULL for one thread */
    int64_t time_limit_ns;  /* a call's, attn_ctx_set_time_limit; 0: none */
    attn_interrupt_fn interrupt; /* attn_ctx_set_interrupt's; NULL: none */
    void *interrupt_arg;
    attn_region region[ATTN_REGIONS];
    attn_rope_key rope;
};

/* At least bytes of region r of ctx, 64-byte aligned, valid until the
 * region next grows (a growth does not keep the contents). NULL when out
 * of memory. */
void *attn_ctx_region(attn_ctx *ctx, int r, size_t bytes);

/* The context a public call runs with: ctx itself, or (ctx NULL) a new
 * one-thread context also stored in *own, which the caller frees with
 * attn_ctx_free. NULL when out of memory. */
attn_ctx *attn_ctx_for_call(attn_ctx *ctx, attn_ctx **own);

/* ---------------------------------------------------------- shape.c */

/* Validated sizes of a request; B = 1 when not batched. With heads
 * (rank 4: query (B, H, Lq, Dq), key and value (B, Hkv, Lk, .)), query
 * head h reads key/value head h / (H / Hkv); otherwise H = Hkv = 1. */
typedef struct {
    int batched, heads;
    int64_t B, H, Hkv, Lq, Dq, Lk, Dk, Lv, Dv;
} attn_dims;

/* query/key/value ranks (2 or 3; 4 too when heads_ok; 4 only when bshd,
 * ATTN_QKV_BSHD's (B, L, H, D)), batch and head agreement, non-empty
 * dims, data present; fills d (Lv is value's rows, which the caller
 * compares with Lk or not). */
attn_status attn_check_qkv(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                           int heads_ok, int bshd, attn_dims *d, attn_error *err);

/* ATTN_ERR_PARAM naming "qkv_layout" when o sets one other than BHSD:
 * `who`'s tensors have no (B, H, L, D) form to change (multi-head's
 * (B, L, E), the KV cache's (T, H, d)). */
attn_status attn_refuse_layout(const attn_options *o, const char *who, attn_error *err);

/* hidden_size and output_size: 0 (the default, Dq) or positive. */
attn_status attn_check_sizes(int64_t hidden_size, int64_t output_size, attn_error *err);

/* Grouped-query heads: *hkv = given (0: H), which must divide H
 * (ATTN_ERR_PARAM naming "num_kv_heads" otherwise). */
attn_status attn_check_kv_heads(int64_t H, int64_t given, int64_t *hkv, attn_error *err);

/* ATTN_ERR_PARAM for the first option o gives that rule `as` does not
 * take (attn_rule_takes), naming the rules that take it and, as the one
 * refusing it, `who` ("general", "multi-head softmax attention"). Multi-head
 * attention checks as dot, or as linear. */
attn_status attn_check_taken(const attn_options *o, attn_rule as, const char *who,
                             attn_error *err);
/* That refusal, for an option the caller found given. */
attn_status attn_refuse_option(attn_option opt, const char *who, attn_error *err);
/* ATTN_ERR_PARAM "lse" when a computation that takes what rule `as`
 * takes (`who`) cannot give the log-sum-exp: a rule without a softmax
 * over the keys, or hard attention. */
attn_status attn_check_lse(attn_rule as, const attn_options *o, const char *who, attn_error *err);

/* The scores' dimensions that a request's masks are checked against. */
typedef struct {
    int64_t B, H, Lq, Lk; /* H = 0: no head dimension */
    int heads3;           /* a rank-3 mask or bias is per head, (H, Lq, Lk) as PyTorch
                           * broadcasts it against a query with heads; else (B, Lq, Lk),
                           * or with H > 1 (B H, Lq, Lk) as nn.MultiheadAttention's */
    const char *lk;       /* the key count's symbol in messages: "Lk", "Lv" or "len" */
} attn_score_dims;

/* The options, for a computation that takes what rule `as` takes (`who`
 * refusing the others, see attn_check_taken; multi-head as dot or
 * linear, the KV cache as dot), then their values: feature_map, masks,
 * bias, window and hard against *sd. */
attn_status attn_check_options(const attn_options *o, attn_rule as, const char *who,
                               const attn_score_dims *sd, attn_error *err);

/* A rank-3 mask or bias of per-head planes as the rank 4 it stands for,
 * the form attn_masks_at reads: with heads3 (H, Lq, Lk) as (1, H, Lq,
 * Lk); without, nn.MultiheadAttention's (B H, Lq, Lk) as (B, H, Lq, Lk). A
 * per-batch-row one stays rank 3. */
void attn_maskish_rank4(attn_options *o, const attn_score_dims *sd);

/* Elements of the n tensors p[i] that are not NULL, summed in double. */
double attn_tensors_floats(const attn_tensor *const *p, size_t n);

/* Checks t has exactly the given shape; otherwise ATTN_ERR_SHAPE naming
 * field "params.<name>" and the expected shape with its symbols. */
attn_status attn_check_param_shape(const char *name, const attn_tensor *t,
                                   int rank, const int64_t *shape,
                                   const char *symbols, const char *who,
                                   attn_error *err);

/* The score pipeline of one (batch, head) slice after the rule's scores
 * (attn.h's steps 2 to 5), in the form attn_sdpa_job uses: mask views,
 * the band of causal and the window around i' = i + off (a side wider
 * than every distance is stored as unbounded, -1, so sums of positions
 * cannot overflow), softcap, the head's ALiBi slope and sink. */
typedef struct {
    const uint8_t *mask; int64_t mask_stride;
    const uint8_t *key_mask;
    const float *bias; int64_t bias_stride;
    int causal;
    int64_t window_left, window_right; /* < 0: that side unbounded */
    int64_t off;                       /* i' = i + off */
    float softcap;                     /* > 0: on */
    float alibi;                       /* the head's slope; 0: none */
    int has_sink;
    float sink;
    const attn_sparse *sparse;         /* NULL: none (sparse.c; set by the front end) */
} attn_row_masks;

void attn_masks_at(const attn_options *o, int64_t b, int64_t h, int64_t H,
                   int64_t Lq, int64_t Lk, attn_row_masks *m);

/* rope for a head of hd features: the checks attn_check_options cannot
 * make without the head size (dims even and <= hd). */
attn_status attn_check_rope(const attn_rope *r, int64_t hd, attn_error *err);

/* --------------------------------------------------------- softmax.c */

/* The keys [*j0, *j1) query row i may see under causal and the window
 * (empty: j0 = j1 <= lk). */
void attn_row_range(const attn_row_masks *m, int64_t i, int64_t lk, int64_t *j0, int64_t *j1);

/* Softcap and ALiBi (steps 2 and 3 but the bias) on score x of row i,
 * key j. */
static inline float attn_row_terms(const attn_row_masks *m, int64_t i, int64_t j, float x)
{
    if (m->softcap > 0.0f)
        x = m->softcap * tanhf(x / m->softcap);
    if (m->alibi != 0.0f)
        x -= m->alibi * fabsf((float)(i + m->off - j));
    return x;
}

/* ------------------------------------------------------------ exec.c */

/* A workspace cursor: with base NULL it only measures (used counts the
 * bytes), with base set it also hands out the pieces. A layout is one
 * function run twice, measuring and then carving, so both agree. */
typedef struct {
    char *base;
    double used;    /* bytes, in double so that no product of sizes overflows */
    int threads;    /* the thread count the kernels' scratch is sized for */
    double kernels; /* the most scratch one kernel call of the layout asks */
    double rope;    /* bytes of the rotary table (region ATTN_WS_ROPE) */
} attn_ws;

/* Bytes that n items of `each` bytes take: rounded up to 64. */
static inline double attn_ws_bytes(double n, size_t each)
{
    double b = n * (double)each;
    if (b < 0x1p62) /* the common case, exactly in integers */
        return (double)(((uint64_t)b + 63) & ~(uint64_t)63);
    return ceil(b / 64.0) * 64.0;
}

/* The next piece of n items of `each` bytes (NULL when measuring). */
static inline void *attn_ws_take(attn_ws *ws, double n, size_t each)
{
    void *p = ws->base ? ws->base + (size_t)ws->used : NULL;
    ws->used += attn_ws_bytes(n, each);
    return p;
}

/* What a head's scores are made of. */
typedef enum {
    ATTN_SCORE_DOT,     /* scale * a_i . b_j over d */
    ATTN_SCORE_TANH,    /* sum_h vw[h] * tanh(a_i[h] + b_j[h]) over d (vw NULL: ones) */
    ATTN_SCORE_GIVEN    /* a_i is the row of scores itself */
} attn_score_kind;

/* One head of attention over one (batch, head) slice: the one job type
 * every rule and multi-head fill. The pipeline runs a plain scaled dot
 * product (kind DOT, no hard attention) on the flash kernel and every
 * other head on the row driver (rows.c). */
typedef struct attn_head_job {
    attn_score_kind kind;
    int64_t lq, lk, d, dv;
    const float *a; int64_t a_stride; /* queries (or the scores) */
    const float *b; int64_t b_stride; /* keys */
    const float *vw;
    float scale;
    const float *v; int64_t v_stride;
    float *o; int64_t o_stride;
    float *w; int64_t w_stride; /* NULL: weights not kept */
    attn_row_masks m;
    attn_hard hard;
    int64_t top_k;
    float temperature;  /* ATTN_HARD_SAMPLE: row i draws output draw_base + i */
    uint64_t seed, draw_base;
    const struct attn_rope_pass *rope; /* the flash kernel rotates a and b; NULL: none */
    int64_t rope_shift; /* added to the query rows' rope positions (a packed sequence's) */
    int64_t pos_rows;   /* > 1: row i sits at position i / pos_rows (attn_sdpa_job's) */
    int bf16;           /* attn_options.precision is bf16 (flash kernel only) */
    float *lse;         /* NULL: not wanted; else lq floats, each row's log-sum-exp */
    int64_t kv_group;   /* a plan's model job (attn_heads_take): how many jobs in a
                         * row read one slice of keys and values (grouped-query
                         * heads: H / Hkv), which a bf16 kernel rounds once */
} attn_head_job;

/* Row i of a head job's attention: s holds the raw scores (lk floats) and
 * is overwritten; w receives the weights. tmp is lk floats of scratch,
 * and at least 16.
 * Applies the score pipeline (softcap, bias, ALiBi, masks), a
 * max-subtracted softmax over allowed keys with the sink (all zero when
 * none), then hard attention. */
void attn_row_softmax(float *s, int64_t i, const attn_head_job *j, float *w, float *tmp);
/* attn_row_softmax in two steps, for a row scored in parts: the score
 * pipeline on keys [a, b) of row i (raw scores s[a..b)) into c[0..b-a)
 * (-INFINITY where not allowed; c may be s + a, or below it), returning
 * their max; then softmax and hard attention on n such scores (mx their
 * max) into w (n floats). Over the allowed keys in increasing order, the
 * weights are those of the whole row, bit for bit: the masked keys only
 * ever added zeros. */
float attn_row_scores(float *s, int64_t i, const attn_head_job *j, int64_t a, int64_t b,
                      float *c);
void attn_row_weights(float *s, int64_t n, float mx, int64_t i, const attn_head_job *j,
                      float *w, float *tmp);
/* The log-sum-exp of n final scores (-INFINITY where not allowed) and the
 * masks' sink: ln(sum_j e^s_j + e^sink), summed in double; -INFINITY when
 * nothing is allowed and there is no sink. */
float attn_row_lse(const float *s, int64_t n, const attn_row_masks *m);

/* n head jobs and room to run them on either kernel. */
typedef struct {
    attn_head_job *jobs;
    attn_sdpa_job *flash;
} attn_heads;

/* The most head jobs a front end runs at once: more slices run in groups,
 * so their descriptions (some 600 bytes each) and per-job kernel scratch
 * take a few MB whatever the slice count (400000 one-row slices took 230 MB
 * at once, which the context then kept); a group keeps every thread busy. */
#define ATTN_JOBS_PER_RUN 4096

/* Takes room for n head jobs like model (its kind, sizes, hard attention
 * and whether w is NULL are what counts) and, while measuring, notes the
 * scratch their kernel will ask (model may be NULL when carving). */
void attn_heads_take(attn_ws *ws, int64_t n, const attn_head_job *model, attn_heads *h);

/* A weights pointer for a model job: not NULL when weights are kept. */
float *attn_model_weights(int kept);

/* One projection for attn_gemm_nt: C[m,n] = A[m,k] B[n,k]^T (+ bias). */
typedef struct {
    int64_t m, n, k;
    const float *a, *b, *bias;
    float *c;
    int64_t lda, ldb, ldc; /* row strides in floats */
    const float *bp;       /* B packed (attn_gemm_pack), or NULL */
    const void *packer;    /* what attn_gemm_pack returned for bp */
    int64_t cg, cgs;       /* C's column groups (attn_gemm_nt_packed), cg 0: plain rows */
} attn_gemm_call;

/* While measuring, notes the scratch the n projections g will ask (their
 * sizes count, the pointers may be NULL). */
void attn_ws_gemms(attn_ws *ws, const attn_gemm_call *g, int n);

/* Starts job j for slice (b, h) of H heads (H = 1 for the rules): sizes,
 * masks, hard attention and the weights (w NULL: not kept), the rest zero
 * for the caller to fill (kind, d, dv, a, b, v, o, scale, vw). */
void attn_head_init(attn_head_job *j, const attn_options *o, int64_t b, int64_t h, int64_t H,
                    int64_t lq, int64_t lk, float *w);

/* One computation in progress. */
typedef struct {
    attn_ctx *ctx;
    int threads;
} attn_exec;

/* The n projections g, in order, on the call's threads. */
void attn_exec_gemms(const attn_exec *ex, const attn_gemm_call *g, int n);

/* Runs the n jobs of h (all alike in kind and hard attention; their sizes
 * may differ, as packed sequences' do) on the kernel that fits them: the
 * one place that chooses. The flash kernel takes them all at once, the row
 * driver each run of one size in turn. */
attn_status attn_exec_heads(const attn_exec *ex, const attn_heads *h, size_t n, attn_error *err);

/* How many of the n jobs from the first have its lq and lk (at least 1):
 * a run the row driver and linear attention take at once. */
size_t attn_same_size_run(const attn_head_job *jobs, size_t n);

struct attn_seed_spec; /* seed.c, below */

/* What a front end (attention.c for the rules, multihead.c) gives the
 * pipeline; plan is its own validated plan, which holds the request. */
typedef struct {
    const char *who; /* the public function, for messages */
    /* The specs of the parameters a call without any would be seeded with
     * (into room for ATTN_SEED_MAX), in drawing order; how many. */
    size_t (*seed_specs)(const void *plan, struct attn_seed_spec *specs);
    /* Plans again with params bound (the seeded set). */
    attn_status (*bind)(void *plan, const attn_named *params, size_t n, attn_error *err);
    /* Takes the pieces the computation uses from ws, keeping them in plan. */
    void (*lay_out)(void *plan, attn_ws *ws);
    /* Computes into out, w and lse (NULL: not wanted), from the pieces
     * lay_out took. */
    attn_status (*run)(const attn_exec *ex, void *plan, float *out, float *w, float *lse,
                       attn_error *err);
} attn_front;

/* The workspace a call of the plan takes (seeded parameters included
 * when n_params is 0). */
double attn_front_scratch(const attn_front *f, void *plan, size_t n_params);

/* A public compute call: checks the buffers, takes the workspace from ctx
 * (NULL: a one-thread context of its own), seeds parameters from seed 0
 * into it when n_params is 0 (binding them plans again), and runs on ctx's
 * threads into out, w and lse (NULL: not wanted). */
attn_status attn_execute(attn_ctx *ctx, const attn_front *f, void *plan, size_t n_params,
                         const attn_shapes *sh, float *out, float *w, float *lse,
                         attn_error *err);

/* ------------------------------------------------------------ rope.c */

/* One set of rows to rotate: rows of `heads` heads of hd features (hd
 * apart) from src into dst (which may be src); row r is at table row
 * pos0 + r % L (L rows per batch element). */
typedef struct {
    const float *src; int64_t src_stride;
    float *dst; int64_t dst_stride;
    int64_t rows, L, heads;
    int64_t pos0;
} attn_rope_set;

/* The rotary embedding of a call: the table (npos rows of positions
 * first + n, each 2 hd floats: C then S, the cos and sin of a pair's angle
 * at both of its features, 1 and 0 past dims), and for the row driver's
 * pre-pass the query (set[0]) and key (set[1]) rows. The flash kernel
 * takes the table and the sets' pos0 instead (attn_sdpa_job.rope). */
typedef struct attn_rope_pass {
    const attn_rope *r;
    int64_t hd, dims;
    double first;
    int64_t npos;
    const float *table;
    const float *rel; /* ATTN_ROPE_REL rows of the positions 0, 1, ... */
    attn_rope_set set[2];
} attn_rope_pass;

/* Rows of relative angles the kernels' decode path turns keys by (a run
 * of keys, ROPE_RUN in kernels_tmpl.h). */
#define ATTN_ROPE_REL 32

/* Whether the flash kernel rotates the rows itself (attn_head_job.rope)
 * rather than reading rows rotated before: for the heads it takes, those
 * without hard attention (rope applies to dot products only), dense (the
 * sparse blocks read rotated rows), when there are few query rows (decode steps: a key is rotated once per block of
 * query rows, and a decode row turns its query instead of the keys). */
#define ATTN_ROPE_KERNEL_ROWS 64
static inline int attn_rope_in_kernel(const attn_options *o, int64_t lq)
{
    return o->hard == ATTN_HARD_NONE && o->sparsity.pattern == ATTN_SPARSE_NONE &&
           lq <= ATTN_ROPE_KERNEL_ROWS;
}

/* Sizes p for validated rope options r, a head dim hd, Lq queries at
 * i' = i + off and Lk keys: dims, the table's positions and each set's
 * pos0. */
void attn_rope_plan(const attn_rope *r, int64_t hd, int64_t Lq, int64_t Lk, int64_t off,
                    attn_rope_pass *p);

/* While measuring, notes the table's bytes in ws. */
void attn_rope_take(attn_ws *ws, const attn_rope_pass *p);

/* Points p->table at the context's table for p, computing the rows the
 * context does not hold yet, on the call's threads. */
void attn_rope_table(const attn_exec *ex, attn_rope_pass *p);

/* Points s at B * L rows of `heads` heads: from src (src_stride floats
 * apart) into dst (dst_stride apart; dst may be src). Leaves s->pos0. */
void attn_rope_set_rows(attn_rope_set *s, const float *src, int64_t src_stride, float *dst,
                        int64_t dst_stride, int64_t B, int64_t L, int64_t heads);

/* Rotates both sets of p (table set) on the call's threads. */
void attn_rope_rows(const attn_exec *ex, const attn_rope_pass *p);

/* ------------------------------------------------------------ rows.c */

/* The row driver's name for a head job. */
typedef attn_head_job attn_row_job;

/* Runs n jobs (all with the same lq and lk) on up to threads threads, in
 * scratch of attn_rows_scratch_bytes(jobs, n, threads) bytes (64-byte
 * aligned). */
attn_status attn_rows_run(const attn_row_job *jobs, size_t n, int threads, void *scratch,
                          attn_error *err);

/* Bytes of scratch attn_rows_run needs; SIZE_MAX when that overflows. */
size_t attn_rows_scratch_bytes(const attn_row_job *jobs, size_t n, int threads);

/* ---------------------------------------------------------- linear.c */


/* Floating-point operations of n linear heads like model (2 per
 * multiply-add), causal or not, with or without weights. */
double attn_linear_flops(const attn_head_job *model, double n, int causal);

/* Takes room for n head jobs from ws (as attn_heads_take) and, while
 * measuring, notes the scratch attn_linear_run will ask for n jobs like
 * model (causal or not). */
void attn_linear_take(attn_ws *ws, int64_t n, const attn_head_job *model, int causal,
                      attn_heads *h);

/* Runs the n head jobs of h as linear attention (each job's a, b, v, o, w
 * and key mask; each run of one size at once, attn_same_size_run), with
 * o's causal, align and feature_map, on the call's threads, in the
 * context's kernel scratch. */
attn_status attn_linear_run(const attn_exec *ex, const attn_heads *h, size_t n,
                            const attn_options *o, attn_error *err);

/* ---------------------------------------------------------- sparse.c */

/* The sparsity pattern's values against Lq, Lk: ATTN_ERR_PARAM naming
 * "sparsity" or the member at fault ("sparsity.window", ...). */
attn_status attn_sparsity_check(const attn_options *o, int64_t Lq, int64_t Lk, attn_error *err);

/* The pattern's block layout size (attn_shapes.layout_*), zeros without
 * one. The options must have passed attn_sparsity_check. */
void attn_sparsity_dims(const attn_options *o, int64_t Lq, int64_t Lk, int64_t *rows,
                        int64_t *cols, int64_t *block);

/* About how many (query, key) pairs of one head the pattern allows (for
 * the cost); Lq * Lk without a pattern. */
double attn_sparsity_pairs(const attn_options *o, int64_t Lq, int64_t Lk);

/* What slices of lq x lk cost beside their multiply-adds, in operations
 * at the dense kernel's rate (cost.c): added to attn_shapes.flops. */
double attn_extra_cost(const attn_options *o, double slices, int64_t lq, int64_t lk, int64_t width,
                       int64_t tanh_units, int rows);

/* The pattern in the kernels' form (kernels.h) into *sp: its pieces are
 * taken from ws, and filled when ws carves (sp is all zero without a
 * pattern, or while measuring). */
void attn_sparse_lay_out(attn_ws *ws, const attn_options *o, int64_t Lq, int64_t Lk,
                         attn_sparse *sp);

/* ------------------------------------------------------------ seed.c */

/* One parameter to draw: a Linear weight/bias (uniform, bound
 * 1/sqrtf(fan_in)), a LayerNorm weight (ones) / bias (zeros), or an
 * nn.Embedding table (normal(0, 1)). */
typedef enum { ATTN_INIT_UNIFORM, ATTN_INIT_ONES, ATTN_INIT_ZEROS, ATTN_INIT_NORMAL } attn_init;

typedef struct attn_seed_spec {
    const char *name; /* static string */
    int rank;
    int64_t shape[2];
    int64_t fan_in;
    attn_init init;
} attn_seed_spec;

#define ATTN_SEED_MAX 11 /* specs of the largest set (multi-head W_*, learned positions, norm) */

/* Floats of the specs' tensors, summed in double (no overflow). */
double attn_seed_floats(const attn_seed_spec *specs, size_t n);

/* The parameters attn_seed_params draws for rule at sizes d, hidden size
 * dh and output size dout, in drawing order, into specs (room for
 * ATTN_SEED_MAX); returns how many, or -1 for an unknown rule. */
int attn_rule_seed_specs(attn_rule rule, const attn_dims *d, int64_t dh, int64_t dout,
                         attn_seed_spec *specs);

/* Checks that every spec's size, and their bytes together, can be had;
 * *total gets the floats of all of them. ATTN_ERR_TOO_LARGE naming the
 * one that cannot ("params" for the sum). */
attn_status attn_seed_size(const attn_seed_spec *specs, size_t n, int64_t *total,
                           attn_error *err);

/* What a plan says of a seeded set: *floats, its floats (for the cost),
 * and attn_seed_size's verdict on whether it can be made. */
attn_status attn_seed_count(const attn_seed_spec *specs, size_t n, double *floats,
                            attn_error *err);

/* Draws the specs in order from one SplitMix64 stream: items[i] gets
 * spec i's name, shape and data, which lies in data (room for
 * attn_seed_floats floats). */
void attn_seed_fill(const attn_seed_spec *specs, size_t n, uint64_t seed, attn_named *items,
                    float *data);

/* attn_seed_fill into a new set (one allocation). */
attn_status attn_seed_build(const attn_seed_spec *specs, size_t n, uint64_t seed,
                            attn_param_set **out, attn_error *err);

#endif /* ATTN_INTERNAL_H */
