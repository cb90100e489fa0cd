/* rules.c - the rules' names and their static self-description
 * (attn_rule_describe). */
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
