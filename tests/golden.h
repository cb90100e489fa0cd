/* golden.h - reads the golden test vectors in tests/golden/ (one case per
 * file, written by tests/gen_golden.py from PyTorch); knows nothing of lib/.
 *
 * The format is line-oriented text a reader can scan:
 *
 *   # free text                     a comment (anywhere, whole line)
 *   case <name>                     first non-comment line
 *   rule <dot|scaled_dot|general|additive|concat_tanh|concat|multihead>
 *   <option> <value...>             e.g. "causal 1", "window 2",
 *                                   "hard argmax", "hard top_k 3",
 *                                   "scale 0.3", "num_heads 8",
 *                                   "num_kv_heads 2", "seed 7",
 *                                   "hidden_size 6", "output_size 32",
 *                                   "average_weights 1", "need_weights 0",
 *                                   "positional_encoding sinusoidal",
 *                                   "residual_norm 1"
 *   tensor <name> <rank> <dims...>  an input float tensor (query, key,
 *                                   value, bias), followed by its values
 *   mask <name> <rank> <dims...>    an input mask (mask, key_mask), values
 *                                   0 or 1 (1 = may attend)
 *   param <name> <rank> <dims...>   a parameter under its PyTorch state_dict
 *                                   name ("attn.weight"), values follow, or
 *   param <name> <rank> <dims...> splitmix64 <seed> <fan_in>
 *                                   values not stored: drawn from a fresh
 *                                   SplitMix64 stream as lib/attn.h
 *                                   documents ((2u-1)/sqrtf(fan_in), float32)
 *   expect <name> <rank> <dims...>  an expected result: "output", "weights",
 *                                   or, in seeded cases (option "seed"), each
 *                                   parameter the seed must produce, in order
 *   end                             last line
 *
 * Values are whitespace-separated decimal floats (9 significant digits, so
 * float32 inputs round-trip exactly), any number per line, row-major.
 * Rows with nothing to attend are expected as zeros (torch gives NaN there;
 * the contract says zeros).
 */
#ifndef GOLDEN_H
#define GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#define GOLDEN_MAX_RANK 4

typedef enum {
    GOLDEN_TENSOR = 0, /* input float tensor */
    GOLDEN_MASK,       /* input mask: data holds 0/1 in both f and m */
    GOLDEN_PARAM,      /* parameter */
    GOLDEN_EXPECT      /* expected result */
} golden_kind;

typedef struct {
    golden_kind kind;
    char name[64];
    int rank;
    int64_t shape[GOLDEN_MAX_RANK];
    int64_t count;  /* product of shape (1 for rank 0) */
    float *f;       /* count floats (masks too, as 0.0/1.0) */
    uint8_t *m;     /* count bytes, masks only (else NULL) */
} golden_tensor;

typedef struct {
    char key[32];
    char value[64]; /* the rest of the line, e.g. "top_k 3" */
} golden_option;

typedef struct golden_case {
    char name[96];
    char rule[32];
    golden_option *options;
    size_t n_options;
    golden_tensor *tensors; /* in file order */
    size_t n_tensors;
} golden_case;

/* Parses one case file into *out (which the caller then frees with
 * golden_free). Returns 0, or -1 with a message "file:line: what" in err. */
int golden_load(const char *path, golden_case *out, char *err, size_t errlen);

/* Frees what golden_load allocated; the struct itself is the caller's. */
void golden_free(golden_case *c);

/* The first tensor of that kind and name, or NULL. Borrowed from c. */
const golden_tensor *golden_get(const golden_case *c, golden_kind kind, const char *name);

/* An option's value string, or NULL when absent. Borrowed from c. */
const char *golden_opt(const golden_case *c, const char *key);

/* An option as an integer; def when absent. */
long long golden_opt_int(const golden_case *c, const char *key, long long def);

/* The sorted paths of every *.txt file in dir. *paths is a new array of new
 * strings; free with golden_list_free. Returns the count, or -1. */
int golden_list(const char *dir, char ***paths);
void golden_list_free(char **paths, int n);

/* SplitMix64 (Steele, Lea, Flood 2014): the generator behind "splitmix64"
 * parameters, written here independently of lib/. */
uint64_t golden_splitmix64(uint64_t *state);

/* Fills n floats as lib/attn.h documents seeded parameters:
 * (2u - 1) * (1/sqrtf(fan_in)) in float32, u = (next >> 40) * 2^-24. */
void golden_fill_uniform(uint64_t *state, float *dst, int64_t n, int64_t fan_in);

/* One parameter of a seeded set as lib/attn.h documents seeding: its
 * name, shape and fan_in (> 0: uniform, bound 1/sqrtf(fan)), or -1 for
 * ones, -2 for zeros (LayerNorm), drawing nothing. */
typedef struct {
    const char *name;
    int rank;
    int64_t shape[2];
    int64_t fan;
} golden_seed_spec;

golden_seed_spec golden_spec(const char *name, int rank, int64_t a, int64_t b, int64_t fan);

#define GOLDEN_MHA_SPECS 10

/* The seeded set of multi-head attention (embed E, key and value widths
 * kdim and vdim, H heads of which Hkv for keys and values, residual_norm)
 * in the documented order: W_q, W_k, W_v, W_o weights and biases when
 * Hkv < H, else nn.MultiheadAttention's in_proj (or q/k/v_proj) and
 * out_proj; then the norm. Fills sp (GOLDEN_MHA_SPECS at most) and
 * returns the count. */
size_t golden_mha_seed_specs(int64_t E, int64_t kdim, int64_t vdim, int64_t H, int64_t Hkv,
                             int residual_norm, golden_seed_spec *sp);

#endif /* GOLDEN_H */
