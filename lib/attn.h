/* attn.h - the attention kernel library: every rule of the service contract,
 * float32, batched or not, with masks, hard attention and multi-head.
 *
 * This is the library's only public header. It knows nothing of HTTP or
 * JSON. The semantics are those of ../shared/contract.md (the service
 * contract); PyTorch's are followed where the contract is silent.
 *
 * Conventions for every call below:
 *   - Tensors are dense, row-major float32. The library never frees or keeps
 *     a pointer to a caller's tensor beyond the call that receives it.
 *   - A tensor or mask with rank 0 is "absent".
 *   - Output buffers are given by the caller; attn_plan / attn_mha_plan say
 *     how many floats they must hold.
 *   - Every call that can fail returns an attn_status and, when err is not
 *     NULL, fills err->field (the offending request field, e.g. "key" or
 *     "params.attn.weight") and err->message (what was wrong and what was
 *     expected), worded for an API user so a server can pass them on as is.
 *   - Calls are thread-safe except that one attn_ctx must not be used by two
 *     threads at once.
 */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_MAX_RANK 4

/* ---------------------------------------------------------------- status */

typedef enum {
    ATTN_OK = 0,
    ATTN_ERR_SHAPE,     /* shapes that do not fit the rule (422 shape_mismatch) */
    ATTN_ERR_PARAM,     /* a bad option or parameter value (422 invalid_param) */
    ATTN_ERR_TOO_LARGE, /* a size that overflows or cannot be allocated (413 too_large) */
    ATTN_ERR_NOMEM,     /* out of memory for scratch space */
    ATTN_ERR_ARG        /* a programming error by the caller (NULL pointer, ...) */
} attn_status;

/* A static English word for a status ("ok", "shape mismatch", ...). */
const char *attn_status_str(attn_status st);

typedef struct {
    char field[64];    /* request field at fault, "" when none */
    char message[320]; /* what was wrong and what was expected */
} attn_error;

/* out = a * b for sizes; returns 0 and leaves *out untouched on overflow
 * (either factor negative counts as overflow). Shapes from the network must
 * be multiplied with this. */
int attn_size_mul(int64_t a, int64_t b, int64_t *out);

/* --------------------------------------------------------------- tensors */

/* A borrowed view of a float32 tensor. rank 0 means absent. */
typedef struct {
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    const float *data;
} attn_tensor;

/* A borrowed view of a boolean mask, one byte per element, nonzero = true =
 * may attend. rank 0 means absent. */
typedef struct {
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    const uint8_t *data;
} attn_mask;

/* A named parameter: the name is a PyTorch state_dict key ("attn.weight"). */
typedef struct {
    const char *name;
    attn_tensor t;
} attn_named;

/* A set of parameters owned by the library (see attn_seed_params).
 * items[i].name and items[i].t.data stay valid until attn_param_set_free. */
typedef struct {
    size_t n;
    attn_named *items;
} attn_param_set;

/* Frees a set made by the library; NULL is a no-op. */
void attn_param_set_free(attn_param_set *set);

/* ----------------------------------------------------------------- rules */

typedef enum {
    ATTN_RULE_DOT = 0,
    ATTN_RULE_SCALED_DOT,
    ATTN_RULE_GENERAL,     /* Luong */
    ATTN_RULE_ADDITIVE,    /* Bahdanau */
    ATTN_RULE_CONCAT_TANH,
    ATTN_RULE_CONCAT,      /* seq2seq decoder step */
    ATTN_RULE_COUNT
} attn_rule;

/* The rule's URL name ("scaled_dot"), or NULL when out of range. */
const char *attn_rule_name(attn_rule rule);

/* Looks a rule up by its URL name; returns 0 and sets *out when found. */
int attn_rule_from_name(const char *name, attn_rule *out);

/* Self-description of a rule, for GET /rules. All strings are static. */
typedef struct {
    const char *name;  /* "general" */
    const char *shape; /* "(Dq, Dk)" */
    int optional;      /* may be left out when the others are given */
} attn_param_info;

typedef struct {
    const char *name;        /* URL name */
    const char *title;       /* "Luong general" */
    const char *formula;     /* the score, plain text */
    int needs_same_dim;      /* Dq must equal Dk */
    size_t n_params;
    const attn_param_info *params;
} attn_rule_info;

/* Static description of a rule, or NULL when out of range. */
const attn_rule_info *attn_rule_describe(attn_rule rule);

/* -------------------------------------------------------- masking options */

typedef enum {
    ATTN_HARD_NONE = 0,
    ATTN_HARD_ARGMAX, /* one-hot at the row's largest weight, ties: lowest index */
    ATTN_HARD_TOPK    /* keep the top_k largest, renormalise; ties: lowest index */
} attn_hard;

/* What every rule shares after its scores are computed. Masks combine by
 * logical AND; a query row left with no key has all-zero weights and an
 * all-zero output row (never NaN). */
typedef struct {
    attn_mask mask;     /* (Lq,Lk), (B,Lq,Lk); multi-head also (B,H,Lq,Lk) */
    attn_mask key_mask; /* (Lk) or (B,Lk); false = padding key */
    attn_tensor bias;   /* float, same shapes as mask, added to the scores */
    int causal;         /* query i sees key j only where j <= i */
    int has_window;     /* when set, query i sees key j only where |i-j| <= window */
    int64_t window;     /* must be >= 0 */
    attn_hard hard;
    int64_t top_k;      /* 1..Lk, for ATTN_HARD_TOPK */
    int need_weights;   /* 0: weights are not built; the weights buffer may be NULL */
} attn_options;

/* Options with every field at its default (nothing masked, weights wanted). */
attn_options attn_options_default(void);

/* ------------------------------------------------------------ a context */

/* Scratch memory and a thread budget, reused across calls. Not shareable by
 * two threads at once; make one per worker. */
typedef struct attn_ctx attn_ctx;

/* New context; threads <= 0 means "as many as the machine has". Returns
 * NULL when out of memory. Free with attn_ctx_free. */
attn_ctx *attn_ctx_new(int threads);
void attn_ctx_free(attn_ctx *ctx);

/* --------------------------------------------- POST /attention/{rule} */

typedef struct {
    attn_rule rule;
    attn_tensor query; /* (Lq,Dq) or (B,Lq,Dq) */
    attn_tensor key;   /* (Lk,Dk) or (B,Lk,Dk); concat: Lk = Lq */
    attn_tensor value; /* (Lk,Dv) or (B,Lk,Dv); concat: (Lv,Dv) or (B,Lv,Dv) */
    const attn_named *params; /* all the rule's parameters, or n_params = 0 */
    size_t n_params;
    int has_scale;     /* scaled_dot only */
    float scale;       /* default 1/sqrt(Dk) */
    int64_t hidden_size; /* Dh for seeding additive/concat_tanh; 0 = Dq */
    int64_t output_size; /* Dout for seeding concat; 0 = Dq */
    attn_options opt;
} attn_request;

/* Shapes of a request's results. A request without a batch dimension gives
 * results without one. */
typedef struct {
    int out_rank;
    int64_t out_shape[ATTN_MAX_RANK]; /* (B,Lq,Dout) or (Lq,Dout) */
    int w_rank;
    int64_t w_shape[ATTN_MAX_RANK];   /* (B,Lq,Lk), multi-head (B,H,Lq,Lk) */
    int64_t out_count;                /* floats the output buffer must hold */
    int64_t w_count;                  /* floats the weights buffer must hold (0 if not wanted) */
    /* The request's cost, as the computation will incur it: what a caller
     * compares against its limits before calling attn_compute. Doubles, so
     * hostile sizes cannot overflow; attn_plan computes them without
     * allocating, also when n_params == 0. */
    double param_floats;  /* floats of the parameters the call uses; when n_params == 0, what attn_seed_params / attn_mha_seed_params would make */
    double flops;         /* floating-point operations of the computation (2 per multiply-add), an estimate */
    double scratch_bytes; /* workspace the computation takes from the context */
} attn_shapes;

/* Request with every field at its default for the given rule. */
attn_request attn_request_default(attn_rule rule);

/* Validates the whole request (shapes, options, parameters) and fills
 * *shapes, the cost included. Does not compute, and allocates nothing: a
 * request without parameters is planned as it would run with seeded ones
 * (their shapes are not checked, as they are made to fit). */
attn_status attn_plan(const attn_request *req, attn_shapes *shapes, attn_error *err);

/* Makes the parameters the rule needs for the request's shapes, seeded
 * from seed (see "Seeded parameters" below). On ATTN_OK, *out is a new set
 * the caller frees with attn_param_set_free; point req->params at
 * (*out)->items to use it. */
attn_status attn_seed_params(const attn_request *req, uint64_t seed,
                             attn_param_set **out, attn_error *err);

/* Computes the request. output must hold shapes.out_count floats; weights
 * shapes.w_count floats, or may be NULL when opt.need_weights is 0.
 * Validates as attn_plan does. ctx may be NULL (one thread, private
 * scratch). */
attn_status attn_compute(attn_ctx *ctx, const attn_request *req,
                         float *output, float *weights, attn_error *err);

/* ------------------------------------------------------ POST /multihead */

typedef enum {
    ATTN_PE_NONE = 0,
    ATTN_PE_SINUSOIDAL  /* PE[p,2i] = sin(p/10000^(2i/d)), PE[p,2i+1] = cos(same) */
} attn_posenc;

/* torch.nn.MultiheadAttention(E, H, batch_first=True) semantics.
 * Parameter names accepted (biases optional, zero when absent):
 *   in_proj_weight (3E,E), in_proj_bias (3E), out_proj.weight (E,E), out_proj.bias (E)
 *   or q_proj_weight (E,E), k_proj_weight (E,kdim), v_proj_weight (E,vdim) instead of in_proj_weight
 *   or W_q.weight (E,E), W_k.weight (Hkv*E/H,kdim), W_v.weight (Hkv*E/H,vdim),
 *      W_o.weight (E,E) and their .bias; the only names that allow Hkv < H
 *   norm.weight (E), norm.bias (E) for residual_norm (default 1 and 0). */
typedef struct {
    attn_tensor query;   /* (Lq,E) or (B,Lq,E) */
    attn_tensor key;     /* (Lk,kdim) or (B,Lk,kdim); absent = query */
    attn_tensor value;   /* (Lk,vdim) or (B,Lk,vdim); absent = query */
    int64_t num_heads;   /* H, E % H == 0 */
    int64_t num_kv_heads; /* Hkv, H % Hkv == 0; 0 = H */
    const attn_named *params;
    size_t n_params;
    int average_weights; /* weights (B,Lq,Lk) averaged over heads, else (B,H,Lq,Lk) */
    attn_posenc positional_encoding;
    int residual_norm;   /* output = LayerNorm(query' + attention), eps 1e-5 */
    attn_options opt;
} attn_mha_request;

attn_mha_request attn_mha_request_default(void);

/* As attn_plan, for multi-head. */
attn_status attn_mha_plan(const attn_mha_request *req, attn_shapes *shapes, attn_error *err);

/* As attn_seed_params, for multi-head. The names made are in_proj_* when
 * kdim = vdim = E and Hkv = H; q/k/v_proj_weight with in_proj_bias when
 * kdim or vdim differ and Hkv = H; W_* otherwise; plus norm.* when
 * residual_norm is set. */
attn_status attn_mha_seed_params(const attn_mha_request *req, uint64_t seed,
                                 attn_param_set **out, attn_error *err);

/* As attn_compute, for multi-head. */
attn_status attn_mha_compute(attn_ctx *ctx, const attn_mha_request *req,
                             float *output, float *weights, attn_error *err);

/* Seeded parameters.
 * The generator is SplitMix64 (Steele, Lea, Flood 2014) started at the seed.
 * Parameters are drawn in the order listed by attn_seed_params' set, each
 * row-major; every float is u = (next() >> 40) * 2^-24 in [0,1), value =
 * (2u - 1) * bound, computed in float32, with bound = 1/sqrtf(fan_in) for
 * both weight and bias of a Linear (fan_in = its input width), as
 * nn.Linear's default init (in_proj_bias: fan_in = E). LayerNorm weights
 * are 1 and biases 0, drawn from nothing. The same seed gives the same bits
 * on every platform. Order and fan_in per rule:
 *   general      attn.weight (Dq,Dk) Dk; attn.bias (Dq) Dk
 *   additive     query_proj.weight (Dh,Dq) Dq; key_proj.weight (Dh,Dk) Dk;
 *                key_proj.bias (Dh) Dk; v.weight (1,Dh) Dh
 *   concat_tanh  attn.weight (Dh,Dq+Dk) Dq+Dk; attn.bias (Dh) Dq+Dk
 *   concat       att_weight.weight (Lv,Dq+Dk) Dq+Dk; att_weight.bias (Lv) Dq+Dk;
 *                out.weight (Dout,Dq+Dv) Dq+Dv; out.bias (Dout) Dq+Dv
 *   multi-head   in_proj_weight (3E,E) E; in_proj_bias (3E) E;
 *                out_proj.weight (E,E) E; out_proj.bias (E) E
 *             or q_proj_weight (E,E) E; k_proj_weight (E,kdim) kdim;
 *                v_proj_weight (E,vdim) vdim; in_proj_bias; out_proj.*
 *             or W_q.weight, W_q.bias, W_k.weight, W_k.bias, W_v.weight,
 *                W_v.bias, W_o.weight, W_o.bias (fan_in = input width)
 *             then norm.weight, norm.bias when residual_norm is set. */
uint64_t attn_splitmix64(uint64_t *state);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
