/* fields.c - the one table of request fields: which route and which KServe
 * slot takes each, read from JSON into a job, listed in errors and metadata. */
#include "srv.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ATT SRV_F_ATT
#define MHA SRV_F_MHA
#define BOTH (SRV_F_ATT | SRV_F_MHA)
#define BODY SRV_F_BODY
#define KSP SRV_F_KS_PARAM
#define KSI SRV_F_KS_INPUT
#define RA SRV_F_REQ_ATT
#define RM SRV_F_REQ_MHA
#define SN SRV_F_SES_NEW
#define SS SRV_F_SES_STEP
#define SC SRV_F_SES_CUT
#define RS SRV_F_REQ_SES
#define ANY INT64_MIN
#define S(slot) SRV_SLOT_##slot

/* name, type, slot in the job, where taken, least value (integers), shapes
 * (tensors: attention, multi-head), description. Order matters: fields are
 * read (and their errors found) in this order, and KServe lists its inputs
 * in it. */
static const srv_field fields[] = {
    {"query", SRV_FT_TENSOR, S(QUERY), BOTH | SS | BODY | KSI | RA | RM | RS, 0, "(B, Lq, Dq)", "(B, Lq, E)", "the queries; /attention also takes heads, (B, H, Lq, Dq)"},
    {"key", SRV_FT_TENSOR, S(KEY), BOTH | SS | BODY | KSI | RA | RS, 0, "(B, Lk, Dk)", "(B, Lk, kdim)", "the keys (multi-head: query when absent); with heads (B, Hkv, Lk, Dk), Hkv dividing H"},
    {"value", SRV_FT_TENSOR, S(VALUE), BOTH | SS | BODY | KSI | RA | RS, 0, "(B, Lk, Dv)", "(B, Lk, vdim)", "the values (multi-head: query when absent); with heads (B, Hkv, Lk, Dv)"},
    {"mask", SRV_FT_MASK, S(MASK), BOTH | BODY | KSI, 0, "(B, Lq, Lk)", "(B, H, Lq, Lk)", "true where a query may attend to a key"},
    {"key_mask", SRV_FT_MASK, S(KEY_MASK), BOTH | BODY | KSI, 0, "(B, Lk)", "(B, Lk)", "false for padding keys"},
    {"bias", SRV_FT_TENSOR, S(BIAS), BOTH | BODY | KSI, 0, "(B, Lq, Lk)", "(B, H, Lq, Lk)", "added to the scores"},
    {"causal", SRV_FT_BOOL, S(CAUSAL), BOTH | BODY | KSP, 0, NULL, NULL, "query i sees key j only where j <= i' (i' = i, or i + Lk - Lq with align bottom_right)"},
    {"align", SRV_FT_WORD, S(ALIGN), BOTH | BODY | KSP, 0, NULL, NULL, "\"top_left\" or \"bottom_right\": where the diagonal of causal, window, alibi and rope sits"},
    {"window", SRV_FT_WINDOW, S(WINDOW), BOTH | SN | BODY | KSP, 0, NULL, NULL, "w: |i' - j| <= w; or [left, right]: i' - left <= j <= i' + right, null for an unbounded side"},
    {"window_left", SRV_FT_INT, S(WINDOW_LEFT), BOTH | SN | KSP, 0, NULL, NULL, "keys up to this many before i' (the other side unbounded unless given)"},
    {"window_right", SRV_FT_INT, S(WINDOW_RIGHT), BOTH | SN | KSP, 0, NULL, NULL, "keys up to this many after i' (the other side unbounded unless given)"},
    {"softcap", SRV_FT_NUMBER, S(SOFTCAP), BOTH | SN | BODY | KSP, 0, NULL, NULL, "c > 0: scores become c * tanh(s / c)"},
    {"alibi", SRV_FT_HEADS, S(ALIBI), BOTH | SN | BODY | KSP, 0, NULL, NULL, "true (the ALiBi paper's slopes), a slope (/attention without heads) or one slope per head"},
    {"alibi", SRV_FT_TENSOR, S(ALIBI), BOTH | SN | KSI, 0, "(H)", "(H)", "one ALiBi slope per head (/attention: per query head, 1 without heads)"},
    {"sinks", SRV_FT_HEADS, S(SINKS), BOTH | SN | BODY | KSP, 0, NULL, NULL, "a sink logit in each softmax's denominator: a number (/attention without heads) or one per head"},
    {"sinks", SRV_FT_TENSOR, S(SINKS), BOTH | SN | KSI, 0, "(H)", "(H)", "one sink logit per head (/attention: per query head, 1 without heads)"},
    {"rope", SRV_FT_OBJECT, S(ROPE), BOTH | SN | BODY, 0, NULL, NULL, "rotary embedding of query and key rows: {base, style, dims, offset}"},
    {"rope", SRV_FT_BOOL, S(ROPE_ON), BOTH | SN | KSP, 0, NULL, NULL, "rotary embedding with the defaults (rope_* parameters imply it)"},
    {"rope_base", SRV_FT_NUMBER, S(ROPE_BASE), BOTH | SN | KSP, 0, NULL, NULL, "rope: the frequency base (10000)"},
    {"rope_style", SRV_FT_WORD, S(ROPE_STYLE), BOTH | SN | KSP, 0, NULL, NULL, "rope: \"half\" or \"interleaved\""},
    {"rope_dims", SRV_FT_INT, S(ROPE_DIMS), BOTH | SN | KSP, 1, NULL, NULL, "rope: features turned (even, up to the head dim)"},
    {"rope_offset", SRV_FT_INT, S(ROPE_OFFSET), BOTH | SN | KSP, ANY, NULL, NULL, "rope: added to every position"},
    {"need_weights", SRV_FT_BOOL, S(NEED_WEIGHTS), BOTH | SS | BODY | KSP, 0, NULL, NULL, "return the attention weights"},
    {"hard", SRV_FT_HARD, S(HARD), BOTH | BODY | KSP, 0, NULL, NULL, "\"argmax\", {\"top_k\": k} or {\"sample\": {\"temperature\": T}}"},
    {"temperature", SRV_FT_NUMBER, S(TEMPERATURE), BOTH | KSP, 0, NULL, NULL, "hard \"sample\": draws from w^(1/T) (1)"},
    {"sparsity", SRV_FT_OBJECT, S(SPARSITY), BOTH | BODY, 0, NULL, NULL, "a sparse pattern: {pattern: local_global|bigbird|blocks, ...}"},
    {"sparsity", SRV_FT_WORD, S(SP_PATTERN), BOTH | KSP, 0, NULL, NULL, "a sparse pattern: local_global, bigbird or blocks"},
    {"sparsity_window", SRV_FT_INT, S(SP_WINDOW), BOTH | KSP, ANY, NULL, NULL, "local_global: |i' - j| <= window"},
    {"sparsity_global", SRV_FT_INDICES, S(SP_GLOBAL), BOTH | KSI, 0, "(G)", "(G)", "local_global: global token indices"},
    {"sparsity_block", SRV_FT_INT, S(SP_BLOCK), BOTH | KSP, ANY, NULL, NULL, "bigbird, blocks: the block size"},
    {"sparsity_window_blocks", SRV_FT_INT, S(SP_WINDOW_BLOCKS), BOTH | KSP, ANY, NULL, NULL, "bigbird: window blocks (odd, 3)"},
    {"sparsity_global_blocks", SRV_FT_INT, S(SP_GLOBAL_BLOCKS), BOTH | KSP, ANY, NULL, NULL, "bigbird: global blocks (2)"},
    {"sparsity_random_blocks", SRV_FT_INT, S(SP_RANDOM_BLOCKS), BOTH | KSP, ANY, NULL, NULL, "bigbird: random blocks per query block (3)"},
    {"sparsity_layout", SRV_FT_MASK, S(SP_LAYOUT), BOTH | KSI, 0, "(Rb, Cb)", "(Rb, Cb)", "blocks: the block layout"},
    {"return_layout", SRV_FT_BOOL, S(RETURN_LAYOUT), BOTH | BODY | KSP, 0, NULL, NULL, "add the sparsity pattern's block layout to the response"},
    {"feature_map", SRV_FT_WORD, S(FEATURE_MAP), BOTH | BODY | KSP, 0, NULL, NULL, "linear attention: \"elu\" (elu + 1) or \"relu\""},
    {"attention", SRV_FT_WORD, S(ATTENTION), MHA | BODY | KSP, 0, NULL, NULL, "\"softmax\" or \"linear\" (Katharopoulos et al.): each takes the options rule dot or rule linear takes"},
    {"precision", SRV_FT_WORD, S(PRECISION), BOTH | SN | BODY | KSP, 0, NULL, NULL, "\"fp32\" (default) or \"bf16\": query, key, value and probabilities rounded to bfloat16, products summed in float32 (dot, scaled_dot, general, multi-head softmax)"},
    {"qkv_layout", SRV_FT_WORD, S(QKV_LAYOUT), ATT | BODY | KSP, 0, NULL, NULL, "with heads: \"bhsd\" (default), query (B, H, Lq, Dq) as scaled_dot_product_attention takes it, or \"bshd\", (B, Lq, H, Dq) as FlashAttention's flash_attn_func does, for query, key, value and the output (weights and lse stay (B, H, Lq, .))"},
    {"cu_seqlens_q", SRV_FT_INDICES, S(CU_Q), ATT | BODY | KSI, 0, "(B + 1)", NULL, "packed sequences of their own lengths, as flash_attn_varlen_func takes them: query (total_q, H, Dq), sequence i its rows cu_seqlens_q[i] to cu_seqlens_q[i + 1] - 1; output (total_q, H, Dv), weights (B, H, max Lq, max Lk), lse (H, total_q)"},
    {"cu_seqlens_k", SRV_FT_INDICES, S(CU_K), ATT | BODY | KSI, 0, "(B + 1)", NULL, "with cu_seqlens_q: key and value (total_k, Hkv, .), sequence i's keys; default cu_seqlens_q"},
    {"seed", SRV_FT_SEED, S(SEED), BOTH | BODY | KSP, 0, NULL, NULL, "seeds the parameters not given, hard sample's draws and BigBird's random blocks"},
    {"return_params", SRV_FT_BOOL, S(RETURN_PARAMS), BOTH | BODY, 0, NULL, NULL, "echo the parameters used"},
    {"return_lse", SRV_FT_BOOL, S(RETURN_LSE), BOTH | SS | BODY | KSP, 0, NULL, NULL, "add each query row's log-sum-exp of its scores (null for a row with nothing to attend)"},
    {"output_format", SRV_FT_WORD, S(OUTPUT_FORMAT), BOTH | SS | BODY, 0, NULL, NULL, "\"json\" (nested arrays) or \"b64\""},
    {"binary_data_output", SRV_FT_BOOL, S(BINARY_OUTPUT), BOTH | SS | KSP, 0, NULL, NULL, "outputs as binary tensor data"},
    {"num_heads", SRV_FT_INT, S(NUM_HEADS), MHA | SN | BODY | KSP | RM | RS, ANY, NULL, NULL, "an integer that divides the embedding size"},
    {"num_kv_heads", SRV_FT_INT, S(NUM_KV_HEADS), MHA | SN | BODY | KSP, 1, NULL, NULL, "and divide num_heads"},
    {"average_weights", SRV_FT_BOOL, S(AVERAGE_WEIGHTS), MHA | BODY | KSP, 0, NULL, NULL, "weights averaged over the heads"},
    {"positional_encoding", SRV_FT_WORD, S(POSENC), MHA | BODY | KSP, 0, NULL, NULL, "\"sinusoidal\", \"learned\" (params.pos_embedding.weight) or \"none\""},
    {"residual_norm", SRV_FT_BOOL, S(RESIDUAL_NORM), MHA | BODY | KSP, 0, NULL, NULL, "LayerNorm(query + attention)"},
    {"params", SRV_FT_PARAMS, S(PARAMS), BOTH | BODY, 0, NULL, NULL, "tensors named as in the PyTorch state_dict"},
    {"hidden_size", SRV_FT_INT, S(HIDDEN_SIZE), ATT | BODY | KSP, 1, NULL, NULL, "Dh of seeded additive / concat_tanh parameters"},
    {"output_size", SRV_FT_INT, S(OUTPUT_SIZE), ATT | BODY | KSP, 1, NULL, NULL, "Dout of seeded concat parameters"},
    {"scale", SRV_FT_NUMBER, S(SCALE), ATT | SN | BODY | KSP, 0, NULL, NULL, "scaled_dot's factor, 1/sqrt(Dk) by default"},
    {"head_dim", SRV_FT_INT, S(HEAD_DIM), SN | BODY | KSP | RS, 1, NULL, NULL, "d, the width of each head's query, key and value rows"},
    {"max_tokens", SRV_FT_INT, S(MAX_TOKENS), SN | BODY | KSP | RS, 1, NULL, NULL, "the most rows the session's cache holds"},
    {"length", SRV_FT_INT, S(LENGTH), SC | BODY | RS, 0, NULL, NULL, "the rows to keep"},
    /* Triton's sequence extension, on the multihead-decode model */
    {"sequence_id", SRV_FT_SEQ_ID, S(SEQ_ID), SN | SS | KSP, 0, NULL, NULL, "the sequence: the id a sequence_start answer gave, or 32 lowercase hex digits of the client's own (128 random bits)"},
    {"sequence_start", SRV_FT_BOOL, S(SEQ_START), SN | SS | KSP, 0, NULL, NULL, "the sequence's first request: creates its session with the options given"},
    {"sequence_end", SRV_FT_BOOL, S(SEQ_END), SN | SS | KSP, 0, NULL, NULL, "the sequence's last request: its session is freed once it is answered"},
    /* Multi-head parameters as KServe inputs (the rules' come from
     * attn_rule_describe). */
    {"in_proj_weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(3E, E)", ""},
    {"in_proj_bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(3E)", ""},
    {"out_proj.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, E)", ""},
    {"out_proj.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E)", ""},
    {"q_proj_weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, E)", ""},
    {"k_proj_weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, kdim)", ""},
    {"v_proj_weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, vdim)", ""},
    {"W_q.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, E)", ""},
    {"W_q.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E)", ""},
    {"W_k.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(Ekv, kdim)", ""},
    {"W_k.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(Ekv)", ""},
    {"W_v.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(Ekv, vdim)", ""},
    {"W_v.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(Ekv)", ""},
    {"W_o.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E, E)", ""},
    {"W_o.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E)", ""},
    {"norm.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E)", ""},
    {"norm.bias", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(E)", ""},
    {"pos_embedding.weight", SRV_FT_TENSOR, S(LEARNED), MHA | KSI, 0, NULL, "(P, E)", ""},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

/* The members of the object fields. `where` holds, for sparsity, the
 * patterns (1 << attn_pattern) that take the member, and SRV_F_REQ_ATT
 * when those patterns need it; min and desc as above. */
#define LG (1u << ATTN_SPARSE_LOCAL_GLOBAL)
#define BB (1u << ATTN_SPARSE_BIGBIRD)
#define BL (1u << ATTN_SPARSE_BLOCKS)
static const srv_field rope_members[] = {
    {"base", SRV_FT_NUMBER, S(ROPE_BASE), 0, 0, NULL, NULL, "the frequency base (10000)"},
    {"style", SRV_FT_WORD, S(ROPE_STYLE), 0, 0, NULL, NULL, "\"half\" or \"interleaved\""},
    {"dims", SRV_FT_INT, S(ROPE_DIMS), 0, 1, NULL, NULL, "features turned: even, up to the head dim"},
    {"offset", SRV_FT_INT, S(ROPE_OFFSET), 0, ANY, NULL, NULL, "added to every position"},
};
static const srv_field sparsity_members[] = {
    {"pattern", SRV_FT_WORD, S(SP_PATTERN), LG | BB | BL | RA, 0, NULL, NULL, "\"local_global\", \"bigbird\" or \"blocks\""},
    {"window", SRV_FT_INT, S(SP_WINDOW), LG | RA, ANY, NULL, NULL, "|i' - j| <= window"},
    {"global", SRV_FT_INDICES, S(SP_GLOBAL), LG, 0, NULL, NULL, "global token indices"},
    {"block", SRV_FT_INT, S(SP_BLOCK), BB | BL | RA, ANY, NULL, NULL, "the block size"},
    {"window_blocks", SRV_FT_INT, S(SP_WINDOW_BLOCKS), BB, ANY, NULL, NULL, "odd (3)"},
    {"global_blocks", SRV_FT_INT, S(SP_GLOBAL_BLOCKS), BB, ANY, NULL, NULL, "(2)"},
    {"random_blocks", SRV_FT_INT, S(SP_RANDOM_BLOCKS), BB, ANY, NULL, NULL, "(3)"},
    {"layout", SRV_FT_MASK, S(SP_LAYOUT), BL | RA, 0, NULL, NULL, "bool (ceil(Lq/block), ceil(Lk/block))"},
};
#define N_OF(a) (sizeof a / sizeof a[0])

/* The words of each word field, in the order of the values they stand for
 * (the first is value `base`). */
static const struct {
    int slot, base;
    const char *w[4];
} word_sets[] = {
    {S(ALIGN), 0, {"top_left", "bottom_right"}},
    {S(OUTPUT_FORMAT), 0, {"json", "b64"}},
    {S(POSENC), 0, {"none", "sinusoidal", "learned"}},
    {S(ATTENTION), 0, {"softmax", "linear"}},
    {S(FEATURE_MAP), 0, {"elu", "relu"}},
    {S(PRECISION), 0, {"fp32", "bf16"}},
    {S(QKV_LAYOUT), 0, {"bhsd", "bshd"}},
    {S(ROPE_STYLE), 0, {"half", "interleaved"}},
    {S(SP_PATTERN), 1, {"local_global", "bigbird", "blocks"}},
};

/* The word a word field's slot holds for value, "" when none. */
static const char *word_of(int slot, int value)
{
    for (size_t ws = 0; ws < N_OF(word_sets); ws++) {
        int k = value - word_sets[ws].base;
        if (word_sets[ws].slot == slot && k >= 0 && k < 4 && word_sets[ws].w[k])
            return word_sets[ws].w[k];
    }
    return "";
}

static const char *const type_words[] = {
    [SRV_FT_TENSOR] = "tensor", [SRV_FT_MASK] = "mask", [SRV_FT_PARAMS] = "object",
    [SRV_FT_BOOL] = "boolean", [SRV_FT_INT] = "integer", [SRV_FT_NUMBER] = "number",
    [SRV_FT_HARD] = "hard", [SRV_FT_SEED] = "seed", [SRV_FT_WORD] = "string",
    [SRV_FT_WINDOW] = "integer or [left, right]", [SRV_FT_HEADS] = "boolean, number or list",
    [SRV_FT_OBJECT] = "object", [SRV_FT_INDICES] = "list of integers",
    [SRV_FT_SEQ_ID] = "string"}; /* Triton's integers are read, to be refused with a reason */

const char *srv_field_type(const srv_field *f)
{
    return type_words[f->type];
}

unsigned srv_job_where(const srv_job *j)
{
    if (j->kind == SRV_JOB_SESSION)
        return j->ses.where;
    return j->kind == SRV_JOB_MULTIHEAD ? SRV_F_MHA : SRV_F_ATT;
}

/* The library option a field of an attention job sets, for
 * attn_rule_takes: FOR_ALL when every rule takes the field, SEEDED for
 * seed and params (a rule with parameters to seed or draws to make). */
enum { FOR_ALL = -1, SEEDED = -2 };
static int field_option(const srv_field *f)
{
    switch (f->slot) {
    case S(MASK): return ATTN_OPT_MASK;
    case S(KEY_MASK): return ATTN_OPT_KEY_MASK;
    case S(BIAS): return ATTN_OPT_BIAS;
    case S(CAUSAL): return ATTN_OPT_CAUSAL;
    case S(ALIGN): return ATTN_OPT_ALIGN;
    case S(WINDOW): case S(WINDOW_LEFT): case S(WINDOW_RIGHT): return ATTN_OPT_WINDOW;
    case S(SOFTCAP): return ATTN_OPT_SOFTCAP;
    case S(ALIBI): return ATTN_OPT_ALIBI;
    case S(SINKS): return ATTN_OPT_SINKS;
    case S(ROPE): case S(ROPE_ON): case S(ROPE_BASE): case S(ROPE_STYLE): case S(ROPE_DIMS):
    case S(ROPE_OFFSET):
        return ATTN_OPT_ROPE;
    case S(HARD): case S(TEMPERATURE): return ATTN_OPT_HARD;
    case S(SPARSITY): case S(SP_PATTERN): case S(SP_WINDOW): case S(SP_GLOBAL): case S(SP_BLOCK):
    case S(SP_WINDOW_BLOCKS): case S(SP_GLOBAL_BLOCKS): case S(SP_RANDOM_BLOCKS):
    case S(SP_LAYOUT): case S(RETURN_LAYOUT):
        return ATTN_OPT_SPARSITY;
    case S(FEATURE_MAP): return ATTN_OPT_FEATURE_MAP;
    /* which keys a query row's sequence holds, as a key mask says */
    case S(CU_Q): case S(CU_K): return ATTN_OPT_KEY_MASK;
    case S(PRECISION): return ATTN_OPT_PRECISION;
    case S(SCALE): return ATTN_OPT_SCALE;
    case S(HIDDEN_SIZE): return ATTN_OPT_HIDDEN_SIZE;
    case S(OUTPUT_SIZE): return ATTN_OPT_OUTPUT_SIZE;
    case S(SEED): case S(PARAMS): return SEEDED;
    /* a softmax over the keys, which is what a sink joins */
    case S(RETURN_LSE): return ATTN_OPT_SINKS;
    default: return FOR_ALL;
    }
}

int srv_field_applies(const srv_field *f, int rule)
{
    unsigned w = f->where;
    if (rule == SRV_MODEL_MULTIHEAD)
        return (w & SRV_F_MHA) != 0;
    if (rule == SRV_MODEL_DECODE)
        return (w & (SRV_F_SES_NEW | SRV_F_SES_STEP)) != 0;
    const attn_rule_info *info = attn_rule_describe((attn_rule)rule);
    if (!info || !(w & SRV_F_ATT))
        return 0;
    int opt = field_option(f);
    if (opt == SEEDED)
        return info->n_params > 0 || attn_rule_takes((attn_rule)rule, ATTN_OPT_HARD);
    return opt == FOR_ALL || attn_rule_takes((attn_rule)rule, (attn_option)opt);
}

int srv_field_applies_mha(const srv_field *f, int linear)
{
    int opt = field_option(f);
    return (f->where & SRV_F_MHA) &&
           (opt < 0 || attn_rule_takes(linear ? ATTN_RULE_LINEAR : ATTN_RULE_DOT, (attn_option)opt));
}

/* Whether f belongs to every bit of `where` (a job kind and a place),
 * and, for the concat model's KServe inputs, whether the rule takes it
 * (the model lists no input it refuses). */
static int accepts(const srv_field *f, unsigned where)
{
    unsigned kind = where & SRV_F_KINDS, place = where & ~(SRV_F_KINDS | SRV_F_CONCAT);
    if (!(f->where & kind) || (f->where & place) != place)
        return 0;
    return !((where & SRV_F_CONCAT) && (where & SRV_F_KS_INPUT) &&
             !srv_field_applies(f, ATTN_RULE_CONCAT));
}

const srv_field *srv_field_find(const char *name, unsigned where)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (accepts(&fields[i], where) && strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

void srv_fields_each(unsigned where, void (*fn)(void *, const srv_field *), void *ud)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (accepts(&fields[i], where))
            fn(ud, &fields[i]);
}

void srv_name_list(char *out, size_t n, const char *name)
{
    size_t k = strlen(out);
    if (k < n)
        snprintf(out + k, n - k, "%s%s", k ? ", " : "", name);
}

#define LIST_MAX 1024 /* every field's name, 74 of them, takes 864 */

static void list_one(void *ud, const srv_field *f)
{
    srv_name_list(ud, LIST_MAX, f->name);
}

/* Every key of obj must be a field of `where`; what names them in errors.
 * present[i]: fields[i] is one of them (so a request's few keys are looked
 * up, not every field the table has). */
static int only_fields(json_t *obj, unsigned where, const char *what, unsigned char *present,
                       srv_err *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int found = 0;
        for (size_t i = 0; i < N_FIELDS; i++)
            if (fields[i].name[0] == key[0] && accepts(&fields[i], where) &&
                strcmp(fields[i].name, key) == 0)
                found = present[i] = 1;
        if (found)
            continue;
        char list[LIST_MAX] = "";
        srv_fields_each(where, list_one, list);
        return srv_fail(e, 400, "unknown_field", key, "unknown %s \"%.60s\"; the %ss are: %s",
                        what, key, what, list);
    }
    return 0;
}

/* ------------------------------------------------------------ slots */

attn_options *srv_job_options(srv_job *j)
{
    return j->kind == SRV_JOB_MULTIHEAD ? &j->u.mha.opt : &j->u.att.opt;
}
#define job_opt srv_job_options

attn_tensor *srv_job_tensor(srv_job *j, int slot)
{
    int mha = j->kind == SRV_JOB_MULTIHEAD;
    switch (slot) {
    case SRV_SLOT_QUERY: return mha ? &j->u.mha.query : &j->u.att.query;
    case SRV_SLOT_KEY:   return mha ? &j->u.mha.key : &j->u.att.key;
    case SRV_SLOT_VALUE: return mha ? &j->u.mha.value : &j->u.att.value;
    case SRV_SLOT_BIAS:  return &job_opt(j)->bias;
    case SRV_SLOT_ALIBI: return &j->alibi;
    case SRV_SLOT_SINKS: return &j->sinks;
    default: return NULL;
    }
}

attn_mask *srv_job_mask(srv_job *j, int slot)
{
    return slot == SRV_SLOT_MASK ? &job_opt(j)->mask
         : slot == SRV_SLOT_KEY_MASK ? &job_opt(j)->key_mask
         : slot == SRV_SLOT_SP_LAYOUT ? &job_opt(j)->sparsity.layout : NULL;
}

static int *bool_slot(srv_job *j, int slot)
{
    switch (slot) {
    case SRV_SLOT_CAUSAL:          return &job_opt(j)->causal;
    case SRV_SLOT_NEED_WEIGHTS:    return &job_opt(j)->need_weights;
    case SRV_SLOT_RETURN_PARAMS:   return &j->return_params;
    case SRV_SLOT_RETURN_LSE:      return &j->return_lse;
    case SRV_SLOT_RETURN_LAYOUT:   return &j->return_layout;
    case SRV_SLOT_BINARY_OUTPUT:   return &j->binary_output;
    case SRV_SLOT_AVERAGE_WEIGHTS: return &j->u.mha.average_weights;
    case SRV_SLOT_RESIDUAL_NORM:   return &j->u.mha.residual_norm;
    case SRV_SLOT_ROPE_ON:         return &job_opt(j)->rope.on;
    case SRV_SLOT_SEQ_START:       return &j->ses.seq_start;
    case SRV_SLOT_SEQ_END:         return &j->ses.seq_end;
    default: return NULL;
    }
}

/* An integer slot. */
static int64_t *int_slot(srv_job *j, int slot)
{
    attn_options *o = job_opt(j);
    int ses = j->kind == SRV_JOB_SESSION;
    switch (slot) {
    case SRV_SLOT_WINDOW_LEFT:        return &o->window_left;
    case SRV_SLOT_WINDOW_RIGHT:       return &o->window_right;
    case SRV_SLOT_NUM_HEADS:          return ses ? &j->ses.num_heads : &j->u.mha.num_heads;
    case SRV_SLOT_NUM_KV_HEADS:       return ses ? &j->ses.num_kv_heads : &j->u.mha.num_kv_heads;
    case SRV_SLOT_HEAD_DIM:           return &j->ses.head_dim;
    case SRV_SLOT_MAX_TOKENS:         return &j->ses.max_tokens;
    case SRV_SLOT_LENGTH:             return &j->ses.length;
    case SRV_SLOT_HIDDEN_SIZE:        return &j->u.att.hidden_size;
    case SRV_SLOT_OUTPUT_SIZE:        return &j->u.att.output_size;
    case SRV_SLOT_ROPE_DIMS:          return &o->rope.dims;
    case SRV_SLOT_ROPE_OFFSET:        return &o->rope.offset;
    case SRV_SLOT_SP_WINDOW:          return &o->sparsity.window;
    case SRV_SLOT_SP_BLOCK:           return &o->sparsity.block;
    case SRV_SLOT_SP_WINDOW_BLOCKS:   return &o->sparsity.window_blocks;
    case SRV_SLOT_SP_GLOBAL_BLOCKS:   return &o->sparsity.global_blocks;
    case SRV_SLOT_SP_RANDOM_BLOCKS:   return &o->sparsity.random_blocks;
    default: return NULL;
    }
}

static float *number_slot(srv_job *j, int slot)
{
    attn_options *o = job_opt(j);
    switch (slot) {
    case SRV_SLOT_SCALE:       j->u.att.has_scale = 1; return &j->u.att.scale;
    case SRV_SLOT_SOFTCAP:     return &o->softcap;
    case SRV_SLOT_TEMPERATURE: return &o->temperature;
    case SRV_SLOT_ROPE_BASE:   return &o->rope.base;
    default: return NULL;
    }
}

void srv_job_set_indices(srv_job *j, int slot, const int64_t *ix, size_t n)
{
    attn_options *o = job_opt(j);
    switch (slot) {
    case SRV_SLOT_CU_Q: j->cu_q = ix, j->n_cu_q = n; break;
    case SRV_SLOT_CU_K: j->cu_k = ix, j->n_cu_k = n; break;
    default: o->sparsity.global = ix, o->sparsity.n_global = n; break;
    }
}

/* Stores word number k of the slot's set (offset by the set's base). */
static void set_word(srv_job *j, int slot, int k)
{
    attn_options *o = job_opt(j);
    switch (slot) {
    case SRV_SLOT_ALIGN:         o->align = (attn_align)k; break;
    case SRV_SLOT_OUTPUT_FORMAT: j->b64 = k; break;
    case SRV_SLOT_POSENC:        j->u.mha.positional_encoding = (attn_posenc)k; break;
    case SRV_SLOT_ATTENTION:     j->u.mha.linear = k; break;
    case SRV_SLOT_FEATURE_MAP:   o->feature_map = (attn_feature_map)k; break;
    case SRV_SLOT_PRECISION:     o->precision = (attn_precision)k; break;
    case SRV_SLOT_QKV_LAYOUT:    o->qkv_layout = (attn_qkv_layout)k; break;
    case SRV_SLOT_ROPE_STYLE:    o->rope.style = (attn_rope_style)k; break;
    case SRV_SLOT_SP_PATTERN:    o->sparsity.pattern = (attn_pattern)k; break;
    default: break;
    }
}

/* What the front ends read beside the options: alibi and sinks as lists,
 * and the seed, which also draws hard sample's keys and BigBird's blocks. */
int srv_job_finish_options(srv_job *j, srv_err *e)
{
    attn_options *o = srv_job_options(j);
    o->seed = j->seed;
    if (j->alibi.rank > 1 || j->sinks.rank > 1)
        return srv_fail(e, 400, "invalid_field", j->alibi.rank > 1 ? "alibi" : "sinks",
                        "%s must be a list of numbers, one per head", j->alibi.rank > 1 ? "alibi" : "sinks");
    if (j->alibi.rank) {
        o->alibi = 1;
        o->alibi_slopes = j->alibi.data;
        o->n_alibi_slopes = j->alibi.shape[0];
    }
    if (j->sinks.rank) {
        o->sinks = j->sinks.data;
        o->n_sinks = j->sinks.shape[0];
    }
    return 0;
}

/* ------------------------------------------------------------ readers */

static int bad(srv_err *e, const srv_field *f, const char *expect)
{
    return srv_fail(e, 400, "invalid_field", f->name, "%s must be %s", f->name, expect);
}

static int bad_value(srv_err *e, const srv_field *f, const char *expect)
{
    return srv_fail(e, 422, "invalid_param", f->name, "%s must be %s", f->name, expect);
}

/* Setting any member of rope turns it on; so does a rope_* KServe
 * parameter; a window side sets the window; a sparsity member and the
 * temperature are noted for srv_job_check_flat. */
void srv_job_note(srv_job *j, int slot)
{
    attn_options *o = job_opt(j);
    if (slot >= SRV_SLOT_ROPE_BASE && slot <= SRV_SLOT_ROPE_OFFSET)
        o->rope.on = 1;
    if (slot == SRV_SLOT_WINDOW_LEFT || slot == SRV_SLOT_WINDOW_RIGHT)
        o->has_window = 1;
    for (size_t i = 0; i < N_OF(sparsity_members); i++)
        if (sparsity_members[i].slot == slot)
            j->sparsity_given |= 1u << i;
    if (slot == SRV_SLOT_TEMPERATURE)
        j->temperature_given = 1;
}

/* Pattern pat's required members all given (bit i of `given`: member i),
 * else a 400 naming the first missing one as prefix + its name. */
static int sparsity_required(unsigned pat, unsigned given, const char *prefix, const char *pname,
                             srv_err *e)
{
    for (size_t i = 1; i < N_OF(sparsity_members); i++) { /* 0 is the pattern */
        const srv_field *m = &sparsity_members[i];
        if ((m->where & pat) && (m->where & SRV_F_REQ_ATT) && !((given >> i) & 1)) {
            char name[64];
            snprintf(name, sizeof name, "%s%s", prefix, m->name);
            return srv_fail(e, 400, "missing_field", name, "%s is required with pattern %s (%s)",
                            name, pname, m->desc);
        }
    }
    return 0;
}

static int check_flat_sparsity(const srv_job *j, srv_err *e)
{
    attn_pattern p = srv_job_options((srv_job *)j)->sparsity.pattern;
    unsigned pat = p == ATTN_SPARSE_NONE ? 0 : 1u << p;
    const char *pname = word_of(SRV_SLOT_SP_PATTERN, (int)p);
    char name[64], list[200] = "";
    for (size_t i = 1; i < N_OF(sparsity_members); i++) /* 0 is the pattern */
        if (sparsity_members[i].where & pat) {
            snprintf(name, sizeof name, "sparsity_%s", sparsity_members[i].name);
            srv_name_list(list, sizeof list, name);
        }
    for (size_t i = 1; i < N_OF(sparsity_members); i++) {
        const srv_field *m = &sparsity_members[i];
        int given = (j->sparsity_given >> i) & 1;
        snprintf(name, sizeof name, "sparsity_%s", m->name);
        if (given && !pat)
            return srv_fail(e, 400, "missing_field", "sparsity",
                            "%s needs the sparsity parameter, the pattern it belongs to "
                            "(\"local_global\", \"bigbird\" or \"blocks\")", name);
        if (given && !(m->where & pat))
            return srv_fail(e, 400, "invalid_field", name,
                            "%s does not belong to pattern %s; it takes %s", name, pname, list);
    }
    return sparsity_required(pat, j->sparsity_given, "sparsity_", pname, e);
}

int srv_job_check_flat(const srv_job *j, srv_err *e)
{
    attn_hard h = srv_job_options((srv_job *)j)->hard;
    if (j->temperature_given && h != ATTN_HARD_SAMPLE)
        return srv_fail(e, 400, "invalid_field", "temperature",
                        "temperature is hard \"sample\"'s (it draws from w^(1/T)); hard is %s",
                        h == ATTN_HARD_NONE ? "not given" : h == ATTN_HARD_ARGMAX ? "\"argmax\"" : "top_k");
    return check_flat_sparsity(j, e);
}

/* An integer past int64 (srv_json_int's 1) is beyond what any field takes. */
static int past_int64(srv_err *e, const char *name)
{
    return srv_fail(e, 422, "invalid_param", name,
                    "%s is an integer past 2^63 - 1, beyond any value it takes", name);
}

static int read_int(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    int64_t x, *dst = int_slot(j, f->slot);
    int rc = srv_json_int(v, &x);
    if (rc < 0)
        return bad(e, f, "an integer");
    if (rc > 0)
        return past_int64(e, f->name);
    if (f->min != INT64_MIN && x < f->min)
        return srv_fail(e, 422, "invalid_param", f->name, "%s must be at least %lld (%s)",
                        f->name, (long long)f->min, f->desc);
    *dst = x;
    srv_job_note(j, f->slot);
    return 0;
}

/* A number within float32; softcap, whose 0 would mean "off" to the
 * library, must be a normal float32 above 0 (a smaller one would round to
 * that 0, or make the kernels' 1 / c overflow). */
static int read_number(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    float x;
    int rc = srv_json_scalar(v, &x);
    if (rc == -1)
        return bad(e, f, "a number");
    if (rc)
        return bad_value(e, f, "a finite float32 value");
    if (f->slot == SRV_SLOT_SOFTCAP && !(x >= FLT_MIN))
        return srv_fail(e, 422, "invalid_param", f->name,
                        "%s must be at least %.9g (the smallest normal float32), got %g", f->name,
                        (double)FLT_MIN, (double)x);
    *number_slot(j, f->slot) = x;
    srv_job_note(j, f->slot);
    return 0;
}

/* One of the slot's words ("none" of positional_encoding may also be null). */
static int read_word(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    size_t ws = 0;
    while (word_sets[ws].slot != f->slot)
        ws++;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (json_is_null(v) && f->slot == SRV_SLOT_POSENC)
        s = "none";
    for (int k = 0; s && k < 4 && word_sets[ws].w[k]; k++)
        if (!strcmp(s, word_sets[ws].w[k])) {
            set_word(j, f->slot, word_sets[ws].base + k);
            srv_job_note(j, f->slot);
            return 0;
        }
    char expect[120] = "";
    for (int k = 0; k < 4 && word_sets[ws].w[k]; k++) {
        size_t n = strlen(expect);
        snprintf(expect + n, sizeof expect - n, "%s\"%s\"", k ? ", " : "one of ", word_sets[ws].w[k]);
    }
    return bad(e, f, expect);
}

/* A window: an integer w (|i' - j| <= w), or [left, right] with null for
 * an unbounded side. Sides are checked here: -1 is the library's
 * "unbounded". */
static int read_window(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    attn_options *o = job_opt(j);
    int64_t side[2];
    /* past int64 (INT64_MAX from srv_json_int) is as unbounded as null */
    if (srv_json_int(v, &side[0]) >= 0) {
        side[1] = side[0];
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        for (size_t k = 0; k < 2; k++) {
            json_t *x = json_array_get(v, k);
            if (json_is_null(x))
                side[k] = -1;
            else if (srv_json_int(x, &side[k]) < 0)
                return bad(e, f, "an integer w, or [left, right] with each side an integer or null");
            else if (side[k] < 0)
                return srv_fail(e, 422, "invalid_param", f->name,
                                "window sides must be at least 0 (null: unbounded), got %lld",
                                (long long)side[k]);
        }
    } else {
        return bad(e, f, "an integer w, or [left, right] with each side an integer or null");
    }
    if (!json_is_array(v) && side[0] < 0)
        return srv_fail(e, 422, "invalid_param", f->name, "window must be at least 0, got %lld",
                        (long long)side[0]);
    o->has_window = 1;
    o->window_left = side[0];
    o->window_right = side[1];
    return 0;
}

/* "argmax", keep the top k, or draw one key: {"top_k": k}, {"sample":
 * {"temperature": T}} in a JSON body; the integer k or "sample" (with the
 * temperature parameter) as a KServe parameter (parameters hold no
 * objects). */
static int read_hard(srv_job *j, const srv_field *f, json_t *v, unsigned where, srv_err *e)
{
    attn_options *opt = job_opt(j);
    json_t *k, *t;
    int64_t top_k;
    int ks = (where & SRV_F_KS_PARAM) != 0, rc;
    /* k: the parameter itself, or the body's {"top_k": k} */
    json_t *kv = ks ? v : json_is_object(v) && json_object_size(v) == 1 ? json_object_get(v, "top_k") : NULL;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (!strcmp(s, "argmax")) {
        opt->hard = ATTN_HARD_ARGMAX;
    } else if (ks && !strcmp(s, "sample")) {
        opt->hard = ATTN_HARD_SAMPLE;
    } else if ((rc = srv_json_int(kv, &top_k)) >= 0) {
        if (rc)
            return past_int64(e, ks ? f->name : "hard.top_k");
        opt->hard = ATTN_HARD_TOPK;
        opt->top_k = top_k;
    } else if (!ks && json_is_object(v) && json_object_size(v) == 1 &&
               json_is_object(k = json_object_get(v, "sample"))) {
        const char *key;
        json_t *m;
        json_object_foreach(k, key, m) {
            if (strcmp(key, "temperature"))
                return srv_fail(e, 400, "unknown_field", "hard.sample",
                                "unknown member \"%.60s\" of hard.sample; it takes temperature", key);
        }
        t = json_object_get(k, "temperature");
        float x = 1.0f;
        rc = t ? srv_json_scalar(t, &x) : 0;
        if (rc == -1)
            return srv_fail(e, 400, "invalid_field", "hard.sample.temperature",
                            "hard.sample.temperature must be a number");
        if (rc)
            return srv_fail(e, 422, "invalid_param", "hard.sample.temperature",
                            "hard.sample.temperature must be a finite float32 value");
        opt->hard = ATTN_HARD_SAMPLE;
        opt->temperature = x;
    } else {
        return bad(e, f, ks ? "\"argmax\", \"sample\" or an integer k (keep the top k)"
                            : "\"argmax\", {\"top_k\": k} with an integer k, or {\"sample\": "
                              "{\"temperature\": T}}");
    }
    return 0;
}

static int read_params(srv_job *j, const srv_field *f, srv_codec *c, json_t *p, srv_err *e)
{
    if (!json_is_object(p))
        return bad(e, f, "an object of tensors named as in the PyTorch state_dict");
    size_t cnt = json_object_size(p), i = 0;
    int has_params = j->kind == SRV_JOB_MULTIHEAD || attn_rule_describe(j->u.att.rule)->n_params > 0;
    if (cnt == 0 && has_params) /* params are all or none: {} would be seeded ones */
        return srv_fail(e, 422, "invalid_param", "params",
                        "params is empty: give every parameter (GET /rules lists them), or leave "
                        "params out to have them seeded from seed");
    if (cnt == 0)
        return 0;
    attn_named *it = srv_arena_alloc(c->arena, cnt * sizeof *it);
    if (!it)
        return srv_fail(e, 503, "overloaded", "params", "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(p, key, v) {
        char field[96];
        snprintf(field, sizeof field, "params.%s", key);
        it[i].name = key; /* owned by the parsed body, which outlives the job */
        if (srv_decode_tensor(c, v, field, &it[i].t, e))
            return -1;
        i++;
    }
    srv_job_set_params(j, it, cnt);
    return 0;
}

/* alibi or sinks: true (alibi: the paper's slopes), false (alibi: off), a
 * number (/attention) or one per head, as a list or any tensor form of
 * rank 1 (/multihead); their count is the library's to check. */
static int read_heads(srv_job *j, const srv_field *f, srv_codec *c, json_t *v, srv_err *e)
{
    /* a list per head: multi-head, decode sessions, and /attention with
     * query heads (B, H, Lq, Dq); without heads, /attention's one number */
    int mha = j->kind != SRV_JOB_ATTENTION, is_alibi = f->slot == SRV_SLOT_ALIBI;
    attn_tensor *t = srv_job_tensor(j, f->slot);
    char expect[120];
    snprintf(expect, sizeof expect, "%s%s", is_alibi ? "true, false or " : "",
             mha ? "a list of numbers, one per head"
                 : "a number, or a list of numbers, one per query head");
    if (is_alibi && json_is_boolean(v)) {
        job_opt(j)->alibi = json_is_true(v);
        return 0;
    }
    float *one = is_alibi ? &j->alibi_one : &j->sinks_one;
    int rc = mha ? -1 : srv_json_scalar(v, one);
    if (rc == 0) {
        *t = (attn_tensor){1, {1}, one};
        return 0;
    }
    if (rc == -2)
        return bad_value(e, f, "a finite float32 value");
    if (json_is_number(v) || json_is_boolean(v) || json_is_string(v) || json_is_null(v))
        return bad(e, f, expect);
    if (srv_decode_tensor(c, v, f->name, t, e))
        return -1;
    if (t->rank != 1)
        return bad(e, f, expect);
    return 0;
}

/* Token indices, exact: a JSON list of integers, or a long list the
 * scanner lifted out as float32 (exact only below 2^24; larger are
 * refused). Count capped as any tensor's. */
int srv_read_indices(srv_codec *c, json_t *v, const char *field, int64_t **out, size_t *n,
                     srv_err *e)
{
    const srv_blob *b = srv_blob_of(c->scan, v);
    size_t cnt = b && !b->is_string && b->rank == 1 ? (size_t)b->count
               : json_is_array(v) ? json_array_size(v) : SIZE_MAX;
    if (cnt == SIZE_MAX)
        return srv_fail(e, 400, "invalid_field", field, "%s must be a list of integers", field);
    if ((int64_t)cnt > c->max_elements)
        return srv_fail(e, 413, "too_large", field, "%s has %zu indices; this server accepts at most %lld",
                        field, cnt, (long long)c->max_elements);
    int64_t *ix = srv_arena_alloc(c->arena, (cnt ? cnt : 1) * sizeof *ix);
    if (!ix)
        return srv_fail(e, 503, "overloaded", field, "out of memory reading %s", field);
    /* a lifted list's floats hide a fraction that rounds away (0.99999999999
     * is 1.0f): its text must have none, as Jansson's integers have none */
    if (b && b->text && (memchr(b->text, '.', b->text_len) || memchr(b->text, 'e', b->text_len) ||
              memchr(b->text, 'E', b->text_len)))
        return srv_fail(e, 400, "invalid_field", field, "%s must be a list of integers (no fraction or exponent)",
                        field);
    for (size_t i = 0; i < cnt; i++) {
        if (b) {
            float x = b->data[i];
            if (b->has_bool || x != floorf(x))
                return srv_fail(e, 400, "invalid_field", field, "%s[%zu] must be an integer", field, i);
            if (fabsf(x) >= 16777216.0f) /* x is its rounding: name the bound, not x */
                return srv_fail(e, 422, "invalid_param", field,
                                "%s[%zu] is out of range: a list of 128 bytes of text or more "
                                "takes indices of magnitude below 2^24 = 16777216", field, i);
            ix[i] = (int64_t)x;
        } else {
            json_t *x = json_array_get(v, i);
            if (!json_is_integer(x))
                return srv_fail(e, 400, "invalid_field", field, "%s[%zu] must be an integer", field, i);
            ix[i] = json_integer_value(x);
        }
    }
    *out = ix;
    *n = cnt;
    return 0;
}

static int read_one(srv_job *j, const srv_field *f, json_t *v, unsigned where, srv_codec *c,
                    srv_err *e);

/* Triton's sequence_id: an unsigned 64-bit integer or a string (at most
 * 64 bytes here); which ids name a session is the sessions' rule. */
static int read_seq_id(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    if (json_is_string(v)) {
        if (json_string_length(v) > 64)
            return bad_value(e, f, "at most 64 characters");
        j->ses.seq_id_kind = 2;
        j->ses.seq_text = json_string_value(v);
        return 0;
    }
    if (srv_json_u64(v, &j->ses.seq_num))
        return bad(e, f, "an integer from 0 to 18446744073709551615, or a string");
    j->ses.seq_id_kind = 1;
    return 0;
}

/* An object field: its members from a sub-table, named "field.member" in
 * errors; for sparsity, only the members of its pattern. */
static int read_object(srv_job *j, const srv_field *f, json_t *v, srv_codec *c, srv_err *e)
{
    int sp = f->slot == SRV_SLOT_SPARSITY;
    const srv_field *mem = sp ? sparsity_members : rope_members;
    size_t nm = sp ? N_OF(sparsity_members) : N_OF(rope_members);
    if (!json_is_object(v))
        return bad(e, f, sp ? "an object {\"pattern\": ..., ...}" : "an object {base, style, dims, offset}");
    unsigned pat = ~0u;
    json_t *p = sp ? json_object_get(v, "pattern") : NULL;
    if (sp && !p)
        return srv_fail(e, 400, "missing_field", "sparsity.pattern",
                        "sparsity.pattern is required: \"local_global\", \"bigbird\" or \"blocks\"");
    char name[96], list[200] = "";
    srv_field sub = mem[0];
    sub.name = name;
    if (sp) { /* the pattern first: it says which members belong */
        snprintf(name, sizeof name, "sparsity.pattern");
        if (read_one(j, &sub, p, SRV_F_BODY, c, e))
            return -1;
        pat = 1u << job_opt(j)->sparsity.pattern;
    }
    for (size_t i = 0; i < nm; i++)
        if (!sp || (mem[i].where & pat))
            srv_name_list(list, sizeof list, mem[i].name);
    const char *key;
    json_t *m;
    json_object_foreach(v, key, m) {
        size_t i = 0;
        while (i < nm && (strcmp(mem[i].name, key) || (sp && !(mem[i].where & pat))))
            i++;
        snprintf(name, sizeof name, "%s.%.60s", f->name, key);
        if (i == nm)
            return srv_fail(e, 400, "unknown_field", name, "%s is not a member of %s%s%s; its members are: %s",
                            name, f->name, sp ? " with pattern " : "",
                            sp ? json_string_value(p) : "", list);
        if (sp && i == 0)
            continue;
        sub = mem[i];
        sub.name = name;
        if (read_one(j, &sub, m, SRV_F_BODY, c, e))
            return -1;
    }
    if (!sp) {
        job_opt(j)->rope.on = 1;
        return 0;
    }
    unsigned given = 0;
    for (size_t i = 0; i < nm; i++)
        given |= (unsigned)(json_object_get(v, mem[i].name) != NULL) << i;
    return sparsity_required(pat, given, "sparsity.", json_string_value(p), e);
}

/* One present field into the job. */
static int read_one(srv_job *j, const srv_field *f, json_t *v, unsigned where, srv_codec *c,
                    srv_err *e)
{
    switch (f->type) {
    case SRV_FT_TENSOR:
        return srv_decode_tensor(c, v, f->name, srv_job_tensor(j, f->slot), e);
    case SRV_FT_MASK:
        return srv_decode_mask(c, v, f->name, srv_job_mask(j, f->slot), e);
    case SRV_FT_PARAMS:
        return read_params(j, f, c, v, e);
    case SRV_FT_BOOL:
        if (!json_is_boolean(v))
            return bad(e, f, "true or false");
        *bool_slot(j, f->slot) = json_is_true(v);
        return 0;
    case SRV_FT_INT:
        return read_int(j, f, v, e);
    case SRV_FT_NUMBER:
        return read_number(j, f, v, e);
    case SRV_FT_HARD:
        return read_hard(j, f, v, where, e);
    case SRV_FT_SEED:
        return srv_json_u64(v, &j->seed) ? bad(e, f, "an integer from 0 to 18446744073709551615") : 0;
    case SRV_FT_SEQ_ID:
        return read_seq_id(j, f, v, e);
    case SRV_FT_WORD:
        return read_word(j, f, v, e);
    case SRV_FT_WINDOW:
        return read_window(j, f, v, e);
    case SRV_FT_HEADS:
        return read_heads(j, f, c, v, e);
    case SRV_FT_OBJECT:
        return read_object(j, f, v, c, e);
    case SRV_FT_INDICES: {
        int64_t *ix;
        size_t n;
        if (srv_read_indices(c, v, f->name, &ix, &n, e))
            return -1;
        srv_job_set_indices(j, f->slot, ix, n);
        return 0;
    }
    }
    return bad(e, f, "known");
}

/* 422 for a field of an attention job that has no meaning for its rule
 * (GET /rules lists it under not_applicable), naming the rules it has
 * one for: "hidden_size applies to rules additive and concat_tanh, not
 * dot"; every field of an attention job applies to some rule (see
 * srv_field_applies). 0 when it applies. */
static int check_applies(const srv_field *f, attn_rule rule, srv_err *e)
{
    if (srv_field_applies(f, rule))
        return 0;
    const char *names[ATTN_RULE_COUNT] = {0};
    int n = 0;
    for (int r = 0; r < ATTN_RULE_COUNT; r++)
        if (attn_rule_describe((attn_rule)r) && srv_field_applies(f, r))
            names[n++] = attn_rule_name((attn_rule)r);
    char list[LIST_MAX] = "";
    for (int i = 0; i < n; i++) {
        size_t k = strlen(list);
        snprintf(list + k, sizeof list - k, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
    }
    const char *mha = (f->where & SRV_F_MHA) ? " (and multi-head)" : "";
    return srv_fail(e, 422, "invalid_param", f->name, "%s applies to rule%s %s%s, not %s", f->name,
                    n > 1 ? "s" : "", list, mha, attn_rule_name(rule));
}

/* 422 for a field of a multi-head job that its attention does not take,
 * whatever its value, as check_applies does for a rule's: softmax
 * attention takes what rule dot takes, linear what rule linear takes
 * (feature_map on softmax attention, alibi: false on linear). 0 when it
 * applies. */
static int check_applies_mha(const srv_field *f, int linear, srv_err *e)
{
    if (srv_field_applies_mha(f, linear))
        return 0;
    const char *other = linear ? "softmax" : "linear", *mine = linear ? "linear" : "softmax";
    return srv_fail(e, 422, "invalid_param", f->name,
                    "%s applies to multi-head %s attention, not %s (attention is \"%s\")", f->name,
                    other, mine, mine);
}

/* 400 when KServe's rope parameter is false beside a rope_* parameter,
 * which turns rope on: one of the two would be ignored. */
static int check_rope_off(json_t *obj, const unsigned char present[N_FIELDS], unsigned where,
                          srv_err *e)
{
    const srv_field *on = srv_field_find("rope", where);
    if (!on || on->type != SRV_FT_BOOL || !json_is_false(json_object_get(obj, "rope")))
        return 0;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (present[i] && fields[i].slot >= S(ROPE_BASE) && fields[i].slot <= S(ROPE_OFFSET))
            return srv_fail(e, 400, "invalid_field", fields[i].name,
                            "%s turns rope on, but rope is false: give rope true, or leave %s out",
                            fields[i].name, fields[i].name);
    return 0;
}

/* Whether the field called name, as read at where, is among those present. */
static int given(const unsigned char present[N_FIELDS], const char *name, unsigned where)
{
    const srv_field *f = srv_field_find(name, where);
    return f && present[f - fields];
}

int srv_fields_read(json_t *obj, unsigned where, const char *what, srv_codec *c, srv_job *j,
                    srv_err *e)
{
    where |= srv_job_where(j);
    unsigned char present[N_FIELDS] = {0};
    if (only_fields(obj, where, what, present, e))
        return -1;
    /* KServe parameters hold no pairs, so they also take the sides alone */
    if (given(present, "window", where) &&
        (given(present, "window_left", where) || given(present, "window_right", where)))
        return srv_fail(e, 400, "invalid_field", "window",
                        "window sets both sides: give it or window_left and window_right, not both");
    if (check_rope_off(obj, present, where, e))
        return -1;
    for (size_t i = 0; j->kind == SRV_JOB_ATTENTION && i < N_FIELDS; i++)
        if (present[i] && check_applies(&fields[i], j->u.att.rule, e))
            return -1;
    unsigned required = j->kind == SRV_JOB_MULTIHEAD ? SRV_F_REQ_MHA
                      : j->kind == SRV_JOB_SESSION ? SRV_F_REQ_SES : SRV_F_REQ_ATT;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const srv_field *f = &fields[i];
        if (!accepts(f, where))
            continue;
        json_t *v = present[i] ? json_object_get(obj, f->name) : NULL;
        if (v ? read_one(j, f, v, where, c, e) != 0 : (f->where & required) != 0)
            return v ? -1 : srv_fail(e, 400, "missing_field", f->name, "%s is required (%s)",
                                     f->name, f->desc);
    }
    /* after reading: which fields apply depends on the attention read */
    for (size_t i = 0; j->kind == SRV_JOB_MULTIHEAD && i < N_FIELDS; i++)
        if (present[i] && check_applies_mha(&fields[i], j->u.mha.linear, e))
            return -1;
    return srv_job_finish_options(j, e);
}
