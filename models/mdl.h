/* mdl.h - the trained English->French models (training/) run in C: weights, tokenizer, decoding. */
#ifndef MDL_H
#define MDL_H

/* The models layer sits on lib/attn.h: every attention step of every model
 * is one attn_compute (GRU models: the rule they were trained with) or one
 * attn_mha_compute with residual_norm (Transformer). Everything else
 * (embeddings, GRU cells, feed-forward, LayerNorm, logits, greedy and beam
 * search) is here, its dense products and log-softmax on two of the
 * library's internal kernels (lib/kernels.h: attn_gemm_nt, attn_sum_exp),
 * which the shared library hides: the models link libattn.a. The semantics are training/README.md's and
 * training/translate.py's.
 *
 * Loading checks every byte it reads: a truncated, corrupted or mismatched
 * file gives an error message naming the file and the tensor, never a crash.
 * A loaded model is read-only and may be used by many threads at once; each
 * translation takes its own attn_ctx (or NULL). */

#include <stddef.h>
#include <stdint.h>
#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDL_ERR_LEN 400
#define MDL_MAX_BEAM 8
#define MDL_MAX_TEXT_BYTES 4096 /* longest text mdl_tok_encode accepts */

enum { MDL_PAD = 0, MDL_BOS = 1, MDL_EOS = 2, MDL_UNK = 3 };

/* ------------------------------------------------------------ safetensors */

typedef struct {
    char *name;
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    int64_t count;
    float *data; /* 64-byte aligned copy, owned by the file */
} mdl_tensor;

typedef struct {
    size_t n;
    mdl_tensor *t;
    char *model_meta; /* __metadata__.model, or NULL */
} mdl_st_file;

/* Reads a float32 safetensors file (see training/st.py). Returns 0, or -1
 * with err filled ("file: tensor "x": what is wrong"). Checks the header
 * length, JSON, dtypes, shapes (overflow-checked), offsets against the
 * file size, overlaps, and that every value is finite. */
int mdl_st_load(const char *path, mdl_st_file *f, char *err, size_t errn);
/* The same from bytes in memory (path only names them in messages). */
int mdl_st_parse(const char *path, const unsigned char *buf, size_t len, mdl_st_file *f,
                 char *err, size_t errn);
void mdl_st_free(mdl_st_file *f);
const mdl_tensor *mdl_st_find(const mdl_st_file *f, const char *name);

/* ------------------------------------------------------------ tokenizer */

typedef struct mdl_tok mdl_tok;

/* Loads training/bpe.json (vocab, merges, punct, marker). */
mdl_tok *mdl_tok_load(const char *path, char *err, size_t errn);
void mdl_tok_free(mdl_tok *t);
int mdl_tok_vocab_size(const mdl_tok *t);
/* The token's text ("\u2581Open", "<eos>"), or NULL when out of range. */
const char *mdl_tok_str(const mdl_tok *t, int id);
/* Encodes UTF-8 text (len bytes, no NUL needed) as training/tokenizer.py
 * does. Writes at most cap ids; returns the number of ids the text has
 * (may exceed cap: then only cap were written), or -1 when the text is not
 * valid UTF-8 or longer than MDL_MAX_TEXT_BYTES. */
int64_t mdl_tok_encode(const mdl_tok *t, const char *text, size_t len, int32_t *ids, int64_t cap);
/* Decodes ids (specials skipped, U+2581 -> space, one leading space
 * dropped) into a new NUL-terminated string (malloc), or NULL. */
char *mdl_tok_decode(const mdl_tok *t, const int32_t *ids, int64_t n);

/* ------------------------------------------------------------ models */

typedef enum { MDL_KIND_SEQ2SEQ = 0, MDL_KIND_TRANSFORMER } mdl_kind;

typedef struct {
    char name[32];
    mdl_kind kind;
    char rule[16];        /* concat, additive, general, multihead */
    attn_rule lib_rule;   /* seq2seq: the library rule */
    int vocab, emb, hidden, heads, enc_layers, dec_layers, ffn;
    int max_src;          /* source ids including <eos> (48) */
    int max_tgt;          /* produced ids including <eos> (64) */
    int max_pos;          /* Transformer: positional table rows */
    int64_t params;       /* floats in the weights file */
    char *config_json;    /* NAME.json as read (for GET /models), owned */
} mdl_info;

typedef struct mdl_model mdl_model;

/* Loads dir/NAME.json and dir/NAME.safetensors; checks every tensor's name
 * and shape against the config and tok's vocabulary. Returns NULL with err
 * filled on any problem. */
mdl_model *mdl_load(const char *dir, const char *name, const mdl_tok *tok, char *err, size_t errn);
void mdl_free(mdl_model *m);
const mdl_info *mdl_model_info(const mdl_model *m);

typedef struct {
    int beam;       /* 1 = greedy, 2..MDL_MAX_BEAM = beam search */
    int max_len;    /* produced ids at most; 0 = min(max_tgt, 2 * n_src + 10) */
    int want_attention;
    const int32_t *force; /* teacher forcing: produce exactly these n_force ids */
    int n_force;          /* (1..max_tgt); the result's logp and score are theirs */
    int recompute;        /* Transformer: each decoder attention one attn_mha_compute with
                           * residual_norm over the cached layer inputs (keys and values
                           * re-projected every step) instead of the default KV cache (the
                           * projections cached, each head one attn_compute scaled_dot) */
} mdl_opts;

/* One translation. Attention shapes (row-major, floats):
 *   seq2seq: cross (n_out, n_src)
 *   transformer: cross (L_dec, H, n_out, n_src), dec (L_dec, H, n_out, n_out)
 *                (zero above the diagonal), enc (L_enc, H, n_src, n_src) */
typedef struct {
    int n_src, n_out;
    int32_t *src, *out; /* out ends with <eos> when the model produced it */
    float *cross, *dec, *enc;
    int64_t n_cross, n_dec, n_enc; /* float counts */
    double score;       /* sum of log-probabilities of out (beam, forced), 0 for greedy */
    float *logp;        /* forced: the log-probability of each produced id, else NULL */
    float closest;      /* beam: the least score gap, over all steps, between two
                         * neighbours among the 2 x beam + 1 best candidates (near 0,
                         * float rounding alone can reorder them and turn the search;
                         * a tie-break, not a bug), else 0 */
} mdl_result;

/* Translates src ids (the source, <eos> included, 1..max_src of them).
 * ctx may be NULL. Returns 0; -1 with err filled (out of memory, bad
 * arguments); or, with err filled, the attn_status (> 0) of a library
 * call that failed: ATTN_ERR_TIMEOUT or ATTN_ERR_CANCELLED when ctx's
 * time limit or interrupt stopped it. Free the result with
 * mdl_result_free. */
int mdl_translate(const mdl_model *m, attn_ctx *ctx, const int32_t *src, int n_src,
                  const mdl_opts *o, mdl_result *r, char *err, size_t errn);
void mdl_result_free(mdl_result *r);

#ifdef __cplusplus
}
#endif

#endif /* MDL_H */
