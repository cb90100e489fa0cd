/* rules.c - the rules' names, their static self-description
 * (attn_rule_describe) and the options each takes (attn_rule_takes). */
#include <stdio.h>
#include <string.h>
#include "internal.h"

/* Every rule's parameters, rule after rule, as attn_rule_describe lists
 * them: name, shape, optional. */
static const attn_param_info params[] = {
    /* general (2) */
    {"attn.weight", "(Dq, Dk)", 0}, {"attn.bias", "(Dq)", 1},
    /* additive (4) */
    {"query_proj.weight", "(Dh, Dq)", 0}, {"key_proj.weight", "(Dh, Dk)", 0},
    {"key_proj.bias", "(Dh)", 1}, {"v.weight", "(1, Dh)", 0},
    /* concat_tanh (2) */
    {"attn.weight", "(Dh, Dq+Dk)", 0}, {"attn.bias", "(Dh)", 1},
    /* concat (4) */
    {"att_weight.weight", "(Lv, Dq+Dk)", 0}, {"att_weight.bias", "(Lv)", 1},
    {"out.weight", "(Dout, Dq+Dv)", 0}, {"out.bias", "(Dout)", 1},
};

static const attn_rule_info rules[ATTN_RULE_COUNT] = {
    {"dot", "Dot product", "S[i][j] = q_i . k_j", 1, 0, NULL},
    {"scaled_dot", "Scaled dot product",
     "S[i][j] = (q_i . k_j) * scale, scale = 1/sqrt(Dk) unless given", 1, 0, NULL},
    {"general", "Luong general", "S[i][j] = q_i . (W k_j + b)", 0, 2, params},
    {"additive", "Bahdanau additive", "S[i][j] = v . tanh(Wq q_i + Wk k_j + bk)", 0,
     4, params + 2},
    {"concat_tanh", "Concat tanh", "S[i][j] = sum_h tanh(W [q_i; k_j] + b)_h", 0,
     2, params + 6},
    {"concat", "Seq2seq decoder concat",
     "a_i = softmax(att_weight([q_i; k_i])) over Lv, c_i = a_i V, o_i = out([q_i; c_i])", 0,
     4, params + 8},
    {"linear", "Linear attention (Katharopoulos et al. 2020)",
     "o_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i) . sum_j phi(k_j) + 1e-6), "
     "phi = elu + 1 (feature_map \"elu\") or relu; no softmax", 1, 0, NULL},
};

const char *attn_rule_name(attn_rule rule)
{
    if ((int)rule < 0 || rule >= ATTN_RULE_COUNT)
        return NULL;
    return rules[rule].name;
}

int attn_rule_from_name(const char *name, attn_rule *out)
{
    if (!name)
        return 0;
    for (int r = 0; r < ATTN_RULE_COUNT; r++) {
        if (strcmp(name, rules[r].name) == 0) {
            if (out)
                *out = (attn_rule)r;
            return 1;
        }
    }
    return 0;
}

const attn_rule_info *attn_rule_describe(attn_rule rule)
{
    if ((int)rule < 0 || rule >= ATTN_RULE_COUNT)
        return NULL;
    return &rules[rule];
}

/* ------------------------------------------------ the options each rule takes */

#define T(opt) (1u << ATTN_OPT_##opt)
/* the score pipeline's steps 2 to 5 and hard attention */
#define PIPELINE (T(MASK) | T(KEY_MASK) | T(BIAS) | T(CAUSAL) | T(ALIGN) | T(WINDOW) | \
                  T(SOFTCAP) | T(ALIBI) | T(SINKS) | T(HARD))
#define FLASH (PIPELINE | T(ROPE) | T(SPARSITY) | T(PRECISION))

static const unsigned rule_takes[ATTN_RULE_COUNT] = {
    [ATTN_RULE_DOT] = FLASH,
    [ATTN_RULE_SCALED_DOT] = FLASH | T(SCALE),
    [ATTN_RULE_GENERAL] = PIPELINE | T(PRECISION),
    [ATTN_RULE_ADDITIVE] = PIPELINE | T(HIDDEN_SIZE),
    [ATTN_RULE_CONCAT_TANH] = PIPELINE | T(HIDDEN_SIZE),
    [ATTN_RULE_CONCAT] = T(MASK) | T(HARD) | T(OUTPUT_SIZE),
    [ATTN_RULE_LINEAR] = T(KEY_MASK) | T(CAUSAL) | T(ALIGN) | T(FEATURE_MAP),
};

static const char *const option_names[ATTN_OPT_COUNT] = {
    "mask", "key_mask", "bias", "causal", "align", "window", "softcap", "alibi", "sinks",
    "rope", "sparsity", "hard", "precision", "feature_map", "scale", "hidden_size",
    "output_size"};

const char *attn_option_name(attn_option opt)
{
    return (int)opt >= 0 && opt < ATTN_OPT_COUNT ? option_names[opt] : NULL;
}

int attn_rule_takes(attn_rule rule, attn_option opt)
{
    if ((int)rule < 0 || rule >= ATTN_RULE_COUNT || (int)opt < 0 || opt >= ATTN_OPT_COUNT)
        return 0;
    return (rule_takes[rule] & (1u << opt)) != 0;
}

/* Whether o gives opt: a value other than its default. */
static int option_given(const attn_options *o, attn_option opt)
{
    switch (opt) {
    case ATTN_OPT_MASK: return o->mask.rank != 0;
    case ATTN_OPT_KEY_MASK: return o->key_mask.rank != 0;
    case ATTN_OPT_BIAS: return o->bias.rank != 0;
    case ATTN_OPT_CAUSAL: return o->causal != 0;
    case ATTN_OPT_ALIGN: return o->align != ATTN_ALIGN_TOP_LEFT;
    case ATTN_OPT_WINDOW: return o->has_window != 0;
    case ATTN_OPT_SOFTCAP: return o->softcap != 0.0f;
    case ATTN_OPT_ALIBI: return o->alibi != 0;
    case ATTN_OPT_SINKS: return o->sinks != NULL;
    case ATTN_OPT_ROPE: return o->rope.on != 0;
    case ATTN_OPT_SPARSITY: return o->sparsity.pattern != ATTN_SPARSE_NONE;
    case ATTN_OPT_HARD: return o->hard != ATTN_HARD_NONE;
    case ATTN_OPT_PRECISION: return o->precision != ATTN_PRECISION_FP32;
    case ATTN_OPT_FEATURE_MAP: return o->feature_map != ATTN_FM_ELU;
    default: return 0; /* attn_request's own: the caller's */
    }
}

/* The refusal of `name`, which applies where option opt does: naming the
 * rules (and multi-head forms) that take opt, and `who`. */
static attn_status refuse_as(const char *name, attn_option opt, const char *who, attn_error *err)
{
    char list[160] = "";
    int n = 0, total = 0;
    for (int r = 0; r < ATTN_RULE_COUNT; r++)
        total += attn_rule_takes((attn_rule)r, opt);
    for (int r = 0; r < ATTN_RULE_COUNT; r++) {
        if (!attn_rule_takes((attn_rule)r, opt))
            continue;
        size_t k = strlen(list);
        n++;
        snprintf(list + k, sizeof list - k, "%s%s", n == 1 ? "" : n == total ? " and " : ", ",
                 rules[r].name);
    }
    /* multi-head softmax attention takes what dot takes, linear what linear does */
    int sm = attn_rule_takes(ATTN_RULE_DOT, opt), lin = attn_rule_takes(ATTN_RULE_LINEAR, opt);
    const char *mha = sm && lin ? " (and multi-head)"
                    : sm        ? " (and multi-head softmax attention)"
                    : lin       ? " (and multi-head linear attention)" : "";
    return attn_fail(err, ATTN_ERR_PARAM, name, "%s applies to rule%s %s%s, not %s", name,
                     total > 1 ? "s" : "", list, mha, who);
}

attn_status attn_refuse_option(attn_option opt, const char *who, attn_error *err)
{
    return refuse_as(option_names[opt], opt, who, err);
}

attn_status attn_check_lse(attn_rule as, const attn_options *o, const char *who, attn_error *err)
{
    /* a softmax over the keys, which is what a sink joins */
    if (!attn_rule_takes(as, ATTN_OPT_SINKS))
        return refuse_as("lse", ATTN_OPT_SINKS, who, err);
    if (o->hard != ATTN_HARD_NONE)
        return attn_fail(err, ATTN_ERR_PARAM, "lse",
                         "lse is the log of the softmax's sum, and hard attention takes no "
                         "softmax: ask for one or the other");
    return ATTN_OK;
}

attn_status attn_check_taken(const attn_options *o, attn_rule as, const char *who,
                             attn_error *err)
{
    for (int opt = 0; opt < ATTN_OPT_COUNT; opt++)
        if (option_given(o, (attn_option)opt) && !attn_rule_takes(as, (attn_option)opt))
            return attn_refuse_option((attn_option)opt, who, err);
    return ATTN_OK;
}
