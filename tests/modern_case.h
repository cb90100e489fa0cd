/* modern_case.h - one golden_modern case file (tests/golden_modern/, format
 * in its README) read into the reference's request (ref_modern.h): the one
 * parser of the modern option lines, shared by test_modern_ref (the
 * reference against PyTorch) and test_modern (the library against both). */
#ifndef MODERN_CASE_H
#define MODERN_CASE_H

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

/* The case files of dir (golden_list: free with golden_list_free); with
 * none, says so with one failure counted and returns 0. */
int mc_list(const char *dir, char ***paths);

/* The "window" option's value, "L R" or "L" (R = L), either "null" for
 * unbounded (-1). */
void mc_window(const char *s, int64_t *left, int64_t *right);

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
