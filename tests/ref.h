/* ref.h - a plain reference implementation of every attention rule and of
 * multi-head attention: the tests' oracle for lib/.
 *
 * Written from the rules as openapi.yaml and the README define them, not
 * from lib/: it reads the public request structs of attn.h but shares no
 * code with the library. The computing is tests/ref_modern.c's (these
 * functions turn the request into its rm_request): every sum is accumulated
 * in double, loops are the formulas as written, nothing is fused, blocked or
 * vectorised. It trusts its input: call it only on a request the library's
 * attn_plan / attn_mha_plan accepted.
 */
#ifndef REF_H
#define REF_H

#include "attn.h"

/* Computes req into out (out_count doubles, shaped as attn_plan says) and,
 * when w is not NULL, the weights (w_count doubles). *hard_gap (when not
 * NULL) receives, for hard attention, the smallest difference between the
 * last kept and the first dropped score of any row, relative to the
 * scores' size (a near tie makes the choice of keys ambiguous in float32);
 * +inf otherwise. Returns 0, or -1 when a needed parameter is missing. */
int ref_attention(const attn_request *req, double *out, double *w, double *hard_gap);

/* As ref_attention for multi-head attention. Weights are (B,H,Lq,Lk), or
 * (B,Lq,Lk) when req->average_weights is set. With residual_norm,
 * *norm_gain (when not NULL) receives the largest factor by which the
 * LayerNorm magnifies a relative error of its input, max|x| * max|gamma| /
 * sqrt(var + eps) over rows (large when a row's values are nearly equal,
 * e.g. E = 2); 0 otherwise. */
int ref_mha(const attn_mha_request *req, double *out, double *w, double *norm_gain);

#endif /* REF_H */
