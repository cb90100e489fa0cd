/* fields.c - the one table of request fields: which route and which KServe
 * slot takes each, read from JSON into a job, listed in errors and metadata. */
#include "srv.h"

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
#define NC SRV_F_NO_CONCAT
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
    {"query", SRV_FT_TENSOR, S(QUERY), BOTH | SS | BODY | KSI | RA | RM | RS, 0, "(B, Lq, Dq)", "(B, Lq, E)", "the queries"},
    {"key", SRV_FT_TENSOR, S(KEY), BOTH | SS | BODY | KSI | RA | RS, 0, "(B, Lk, Dk)", "(B, Lk, kdim)", "the keys (multi-head: query when absent)"},
    {"value", SRV_FT_TENSOR, S(VALUE), BOTH | SS | BODY | KSI | RA | RS, 0, "(B, Lk, Dv)", "(B, Lk, vdim)", "the values (multi-head: query when absent)"},
    {"mask", SRV_FT_MASK, S(MASK), BOTH | BODY | KSI, 0, "(B, Lq, Lk)", "(B, H, Lq, Lk)", "true where a query may attend to a key"},
    {"key_mask", SRV_FT_MASK, S(KEY_MASK), BOTH | BODY | KSI | NC, 0, "(B, Lk)", "(B, Lk)", "false for padding keys"},
    {"bias", SRV_FT_TENSOR, S(BIAS), BOTH | BODY | KSI | NC, 0, "(B, Lq, Lk)", "(B, H, Lq, Lk)", "added to the scores"},
    {"causal", SRV_FT_BOOL, S(CAUSAL), BOTH | BODY | KSP, 0, NULL, NULL, "query i sees key j only where j <= i"},
    {"window", SRV_FT_INT, S(WINDOW), BOTH | BODY | KSP, 0, NULL, NULL, "query i sees key j only where |i - j| <= window"},
    {"need_weights", SRV_FT_BOOL, S(NEED_WEIGHTS), BOTH | SS | BODY | KSP, 0, NULL, NULL, "return the attention weights"},
    {"hard", SRV_FT_HARD, S(HARD), BOTH | BODY | KSP, 0, NULL, NULL, "\"argmax\", or keep the top k weights"},
    {"seed", SRV_FT_SEED, S(SEED), BOTH | BODY | KSP, 0, NULL, NULL, "seeds the parameters not given"},
    {"return_params", SRV_FT_BOOL, S(RETURN_PARAMS), BOTH | BODY, 0, NULL, NULL, "echo the parameters used"},
    {"output_format", SRV_FT_FORMAT, S(OUTPUT_FORMAT), BOTH | SS | BODY, 0, NULL, NULL, "\"json\" (nested arrays) or \"b64\""},
    {"binary_data_output", SRV_FT_BOOL, S(BINARY_OUTPUT), BOTH | KSP, 0, NULL, NULL, "outputs as binary tensor data"},
    {"num_heads", SRV_FT_INT, S(NUM_HEADS), MHA | SN | BODY | KSP | RM | RS, ANY, NULL, NULL, "an integer that divides the embedding size"},
    {"num_kv_heads", SRV_FT_INT, S(NUM_KV_HEADS), MHA | SN | BODY | KSP, 1, NULL, NULL, "and divide num_heads"},
    {"average_weights", SRV_FT_BOOL, S(AVERAGE_WEIGHTS), MHA | BODY | KSP, 0, NULL, NULL, "weights averaged over the heads"},
    {"positional_encoding", SRV_FT_POSENC, S(POSENC), MHA | BODY | KSP, 0, NULL, NULL, "\"sinusoidal\" or \"none\""},
    {"residual_norm", SRV_FT_BOOL, S(RESIDUAL_NORM), MHA | BODY | KSP, 0, NULL, NULL, "LayerNorm(query + attention)"},
    {"params", SRV_FT_PARAMS, S(PARAMS), BOTH | BODY, 0, NULL, NULL, "tensors named as in the PyTorch state_dict"},
    {"hidden_size", SRV_FT_INT, S(HIDDEN_SIZE), ATT | BODY | KSP, 1, NULL, NULL, "Dh of seeded additive / concat_tanh parameters"},
    {"output_size", SRV_FT_INT, S(OUTPUT_SIZE), ATT | BODY | KSP, 1, NULL, NULL, "Dout of seeded concat parameters"},
    {"scale", SRV_FT_NUMBER, S(SCALE), ATT | SN | BODY | KSP, 0, NULL, NULL, "scaled_dot's factor, 1/sqrt(Dk) by default"},
    {"head_dim", SRV_FT_INT, S(HEAD_DIM), SN | BODY | RS, 1, NULL, NULL, "d, the width of each head's query, key and value rows"},
    {"max_tokens", SRV_FT_INT, S(MAX_TOKENS), SN | BODY | RS, 1, NULL, NULL, "the most rows the session's cache holds"},
    {"length", SRV_FT_INT, S(LENGTH), SC | BODY | RS, 0, NULL, NULL, "the rows to keep"},
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
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static const char *const type_words[] = {
    [SRV_FT_TENSOR] = "tensor", [SRV_FT_MASK] = "mask", [SRV_FT_PARAMS] = "object",
    [SRV_FT_BOOL] = "boolean", [SRV_FT_INT] = "integer", [SRV_FT_NUMBER] = "number",
    [SRV_FT_HARD] = "hard", [SRV_FT_SEED] = "seed", [SRV_FT_FORMAT] = "string",
    [SRV_FT_POSENC] = "string"};

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

/* Whether f belongs to every bit of `where` (a job kind and a place),
 * and, for the concat rule's KServe inputs, whether the rule takes it. */
static int accepts(const srv_field *f, unsigned where)
{
    unsigned kind = where & SRV_F_KINDS, place = where & ~(SRV_F_KINDS | SRV_F_CONCAT);
    if (!(f->where & kind) || (f->where & place) != place)
        return 0;
    return !((where & SRV_F_CONCAT) && (f->where & SRV_F_NO_CONCAT));
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

#define LIST_MAX 400

static void list_one(void *ud, const srv_field *f)
{
    srv_name_list(ud, LIST_MAX, f->name);
}

/* Every key of obj must be a field of `where`; what names them in errors. */
static int only_fields(json_t *obj, unsigned where, const char *what, srv_err *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (srv_field_find(key, where))
            continue;
        char list[LIST_MAX] = "";
        srv_fields_each(where, list_one, list);
        return srv_fail(e, 400, "unknown_field", key, "unknown %s \"%.60s\"; the %ss are: %s",
                        what, key, what, list);
    }
    return 0;
}

/* ------------------------------------------------------------ slots */

static attn_options *job_opt(srv_job *j)
{
    return j->kind == SRV_JOB_MULTIHEAD ? &j->u.mha.opt : &j->u.att.opt;
}

attn_tensor *srv_job_tensor(srv_job *j, int slot)
{
    int mha = j->kind == SRV_JOB_MULTIHEAD;
    switch (slot) {
    case SRV_SLOT_QUERY: return mha ? &j->u.mha.query : &j->u.att.query;
    case SRV_SLOT_KEY:   return mha ? &j->u.mha.key : &j->u.att.key;
    case SRV_SLOT_VALUE: return mha ? &j->u.mha.value : &j->u.att.value;
    case SRV_SLOT_BIAS:  return &job_opt(j)->bias;
    default: return NULL;
    }
}

attn_mask *srv_job_mask(srv_job *j, int slot)
{
    return slot == SRV_SLOT_MASK ? &job_opt(j)->mask
         : slot == SRV_SLOT_KEY_MASK ? &job_opt(j)->key_mask : NULL;
}

static int *bool_slot(srv_job *j, int slot)
{
    switch (slot) {
    case SRV_SLOT_CAUSAL:          return &job_opt(j)->causal;
    case SRV_SLOT_NEED_WEIGHTS:    return &job_opt(j)->need_weights;
    case SRV_SLOT_RETURN_PARAMS:   return &j->return_params;
    case SRV_SLOT_BINARY_OUTPUT:   return &j->binary_output;
    case SRV_SLOT_AVERAGE_WEIGHTS: return &j->u.mha.average_weights;
    case SRV_SLOT_RESIDUAL_NORM:   return &j->u.mha.residual_norm;
    default: return NULL;
    }
}

/* An integer slot, and the flag its presence sets (NULL when none). */
static int64_t *int_slot(srv_job *j, int slot, int **has)
{
    *has = NULL;
    int ses = j->kind == SRV_JOB_SESSION;
    switch (slot) {
    case SRV_SLOT_WINDOW:       *has = &job_opt(j)->has_window; return &job_opt(j)->window_left;
    case SRV_SLOT_NUM_HEADS:    return ses ? &j->ses.num_heads : &j->u.mha.num_heads;
    case SRV_SLOT_NUM_KV_HEADS: return ses ? &j->ses.num_kv_heads : &j->u.mha.num_kv_heads;
    case SRV_SLOT_HEAD_DIM:     return &j->ses.head_dim;
    case SRV_SLOT_MAX_TOKENS:   return &j->ses.max_tokens;
    case SRV_SLOT_LENGTH:       return &j->ses.length;
    case SRV_SLOT_HIDDEN_SIZE:  return &j->u.att.hidden_size;
    case SRV_SLOT_OUTPUT_SIZE:  return &j->u.att.output_size;
    default: return NULL;
    }
}

/* ------------------------------------------------------------ readers */

static int bad(srv_err *e, const srv_field *f, const char *expect)
{
    return srv_fail(e, 400, "invalid_field", f->name, "%s must be %s", f->name, expect);
}

static int read_int(srv_job *j, const srv_field *f, json_t *v, srv_err *e)
{
    if (!json_is_integer(v))
        return bad(e, f, "an integer");
    int *has;
    int64_t x = json_integer_value(v), *dst = int_slot(j, f->slot, &has);
    if (f->min != INT64_MIN && x < f->min)
        return srv_fail(e, 422, "invalid_param", f->name, "%s must be at least %lld (%s)",
                        f->name, (long long)f->min, f->desc);
    *dst = x;
    if (has)
        *has = 1;
    if (f->slot == SRV_SLOT_WINDOW) /* an integer window is [w, w] */
        job_opt(j)->window_right = x;
    return 0;
}

/* "argmax", or keep the top k: {"top_k": k} in a JSON body, the integer k
 * as a KServe parameter (parameters hold no objects). */
static int read_hard(srv_job *j, const srv_field *f, json_t *v, unsigned where, srv_err *e)
{
    attn_options *opt = job_opt(j);
    json_t *k;
    int ks = (where & SRV_F_KS_PARAM) != 0;
    if (json_is_string(v) && strcmp(json_string_value(v), "argmax") == 0) {
        opt->hard = ATTN_HARD_ARGMAX;
    } else if (ks && json_is_integer(v)) {
        opt->hard = ATTN_HARD_TOPK;
        opt->top_k = json_integer_value(v);
    } else if (!ks && json_is_object(v) && json_object_size(v) == 1 &&
               json_is_integer(k = json_object_get(v, "top_k"))) {
        opt->hard = ATTN_HARD_TOPK;
        opt->top_k = json_integer_value(k);
    } else {
        return bad(e, f, ks ? "\"argmax\" or an integer k (keep the top k)"
                            : "\"argmax\" or {\"top_k\": k} with an integer k");
    }
    return 0;
}

/* A string field with two words: which one sets *dst to 1. */
static int read_word(const srv_field *f, json_t *v, const char *off, const char *on,
                     int *dst, srv_err *e)
{
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, off) && strcmp(s, on)) {
        char expect[64];
        snprintf(expect, sizeof expect, "\"%s\" or \"%s\"", on, off);
        return bad(e, f, expect);
    }
    *dst = strcmp(s, on) == 0;
    return 0;
}

static int read_params(srv_job *j, const srv_field *f, srv_codec *c, json_t *p, srv_err *e)
{
    if (!json_is_object(p))
        return bad(e, f, "an object of tensors named as in the PyTorch state_dict");
    size_t cnt = json_object_size(p), i = 0;
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

/* One present field into the job. */
static int read_one(srv_job *j, const srv_field *f, json_t *v, unsigned where, srv_codec *c,
                    srv_err *e)
{
    int word = 0;
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
        if (!json_is_number(v))
            return bad(e, f, "a number");
        j->u.att.has_scale = 1;
        j->u.att.scale = (float)json_number_value(v);
        return 0;
    case SRV_FT_HARD:
        return read_hard(j, f, v, where, e);
    case SRV_FT_SEED:
        return srv_json_u64(v, &j->seed) ? bad(e, f, "an integer from 0 to 18446744073709551615") : 0;
    case SRV_FT_FORMAT:
        return read_word(f, v, "json", "b64", &j->b64, e);
    case SRV_FT_POSENC:
        if (json_is_null(v) || read_word(f, v, "none", "sinusoidal", &word, e) == 0) {
            j->u.mha.positional_encoding = word ? ATTN_PE_SINUSOIDAL : ATTN_PE_NONE;
            return 0;
        }
        return -1;
    }
    return bad(e, f, "known");
}

int srv_fields_read(json_t *obj, unsigned where, const char *what, srv_codec *c, srv_job *j,
                    srv_err *e)
{
    where |= srv_job_where(j);
    if (only_fields(obj, where, what, e))
        return -1;
    unsigned required = j->kind == SRV_JOB_MULTIHEAD ? SRV_F_REQ_MHA
                      : j->kind == SRV_JOB_SESSION ? SRV_F_REQ_SES : SRV_F_REQ_ATT;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const srv_field *f = &fields[i];
        if (!accepts(f, where))
            continue;
        json_t *v = json_object_get(obj, f->name);
        if (v ? read_one(j, f, v, where, c, e) != 0 : (f->where & required) != 0)
            return v ? -1 : srv_fail(e, 400, "missing_field", f->name, "%s is required (%s)",
                                     f->name, f->desc);
    }
    return 0;
}
