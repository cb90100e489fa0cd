/* modern_case.h - one golden_modern case file (tests/golden_modern/, format
 * in its README) read into the reference's request (ref_modern.h): the one
 * parser of the modern option lines, shared by test_modern_ref (the
 * reference against PyTorch) and test_modern (the library against both). */
#ifndef MODERN_CASE_H
#define MODERN_CASE_H

#include "attn.h"
#include "golden.h"
#include "ref_modern.h"

#define MC_MAX_ALLOCS 64
#define MC_MAX_GLOBALS 64

/* Allocations freed together (one case's). */
typedef struct {
    void *p[MC_MAX_ALLOCS];
    int n;
} mc_pool;

/* Keeps p (owned by the pool from then on) for mc_pool_free; returns p, or
 * NULL (and p freed) when p is NULL or the pool is full. */
void *mc_pool_take(mc_pool *pl, void *p);

/* Frees what the pool holds and empties it. */
void mc_pool_free(mc_pool *pl);

/* The case files of dir (NULL: MC_DIR) as golden_list gives them (free with
 * golden_list_free); with none, says so with one failure counted and
 * returns 0. */
#define MC_DIR "tests/golden_modern"
int mc_list(const char *dir, char ***paths);

/* The "window" option's value, "L R" or "L" (R = L), either "null" for
 * unbounded (-1). */
void mc_window(const char *s, int64_t *left, int64_t *right);

/* The "hard" option's value ("argmax", "top_k K", "sample [T]") as its
 * kind, with K in *top_k and T (default 1) in *temperature; RM_HARD_NONE
 * (and both untouched) for anything else. */
rm_hard mc_hard(const char *s, int64_t *top_k, double *temperature);

/* The "sparsity" option lines of c into *sp, when c has them (returns 1;
 * else 0 and *sp as it was): up to MC_MAX_GLOBALS global indices into
 * globals (kept by the caller), the layout pointing into c. */
int mc_sparsity(const golden_case *c, rm_sparsity *sp, int64_t *globals);

/* For the tests that run the library: sp as the library's descriptor, the
 * layout aside (its shape is the caller's). s->global borrows sp's. */
void mc_lib_sparsity(const rm_sparsity *sp, attn_sparsity *s);

typedef struct {
    golden_case c;        /* the file as golden.c reads it */
    rm_request r;         /* the request; arrays point into c or into allocs */
    int multihead;
    int64_t H;            /* heads (1 for the rules) */
    int64_t Dout;         /* output features */
    int64_t n_out, n_w;   /* floats of the output and of the weights */
    mc_pool allocs;       /* what the arrays not in c point into */
    int64_t globals[MC_MAX_GLOBALS];
} mc_case;

/* Reads path into *mc (free with mc_free, also after a failure). Returns 0,
 * or -1 with the reason in err (a format error, an option line this parser
 * does not know, an unknown rule, out of memory). Parameters given as
 * values, or in seeded cases the expected ones, fill the rm_request. */
int mc_read(const char *path, mc_case *mc, char *err, size_t errlen);

void mc_free(mc_case *mc);

#endif /* MODERN_CASE_H */
