/* pool.h - internal: one persistent pthread pool that runs parallel-for
 * loops for the kernels (tasks handed out one at a time from a counter). */
#ifndef ATTN_POOL_H
#define ATTN_POOL_H

#include <stdint.h>

/* One task: task is in [0, ntasks); worker is in [0, threads) and is the
 * same for every task a thread runs, so it can index per-thread scratch. */
typedef void (*attn_pool_fn)(void *arg, int64_t task, int worker);

/* Runs fn for every task on up to `threads` threads (the caller is worker
 * 0) and returns when all are done. When the pool is already busy (another
 * thread's call) or threads <= 1, the caller runs every task itself, so
 * concurrent callers are safe and never wait on each other. Returns the
 * number of threads that took part (>= 1). */
int attn_pool_run(int threads, int64_t ntasks, attn_pool_fn fn, void *arg);

#endif /* ATTN_POOL_H */
