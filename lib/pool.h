/* pool.h - internal: persistent pthread pools that run the kernels'
 * parallel-for loops (tasks handed out one at a time, a thread's CPU
 * naming the part of them it takes first). Each context owns one pool;
 * the kernels reach the pool of the call in progress through
 * attn_pool_use, so their signatures carry only a thread count. */
#ifndef ATTN_POOL_H
#define ATTN_POOL_H

#include "attn.h"

#include <stdatomic.h>
#include <stdint.h>

typedef struct attn_pool attn_pool;

/* One task: task is in [0, ntasks); worker is in [0, threads) and is the
 * same for every task a thread runs, so it can index per-thread scratch. */
typedef void (*attn_pool_fn)(void *arg, int64_t task, int worker);

/* A pool of up to threads - 1 workers (the caller is the other one),
 * started when a loop first needs them. NULL when out of memory. */
attn_pool *attn_pool_new(int threads);

/* Stops and joins the workers and frees the pool; NULL is a no-op. Not
 * while a loop of the pool runs. */
void attn_pool_free(attn_pool *pool);

/* Makes pool the one attn_pool_run uses on the calling thread (NULL: the
 * process-wide pool) and returns the one it replaces, to be restored. */
attn_pool *attn_pool_use(attn_pool *pool);

/* Monotonic nanoseconds (the pool's linger clock): how long a call ran,
 * for attn_pool_settle. */
int64_t attn_pool_now_ns(void);

/* Ends a call of call_ns nanoseconds that used pool (NULL: a no-op):
 * after a long one, its workers go to sleep at once instead of lingering
 * for the next loop, and leave the CPUs to the caller's next work. */
void attn_pool_settle(attn_pool *pool, int64_t call_ns);

/* A call's stop (attn_ctx_set_time_limit, attn_ctx_set_interrupt): the
 * loops of a thread that made it its own (attn_pool_stop_use) start no
 * task after deadline_ns, nor after poll (when not NULL, called with
 * poll_arg about once a millisecond, at the first task on) returned other
 * than ATTN_OK; the first thread to find either sets hit to the status
 * the call returns. The code between loops goes on over what the skipped
 * tasks did not write. */
typedef struct {
    int64_t deadline_ns;
    attn_status (*poll)(void *arg);
    void *poll_arg;
    _Atomic int64_t next_poll_ns;
    _Atomic int hit; /* ATTN_OK, or why the call stopped */
} attn_pool_stop;

/* A stop limit_ns nanoseconds from now (0: none), on the pool's coarse
 * clock (a few nanoseconds a read, milliseconds of resolution), that also
 * polls poll(poll_arg) when poll is not NULL. Returns whether it stops
 * anything: if not, the call need not use it. */
int attn_pool_stop_arm(attn_pool_stop *stop, int64_t limit_ns, attn_status (*poll)(void *),
                       void *poll_arg);

/* Makes stop the one the calling thread's loops check (NULL: none) and
 * returns the one it replaces, to be restored. */
attn_pool_stop *attn_pool_stop_use(attn_pool_stop *stop);

/* Runs fn for every task on up to `threads` threads of the calling
 * thread's pool (the caller is worker 0) and returns when all are done.
 * Pools are independent: loops of different pools run in parallel, each
 * with its own workers. When the pool is already busy (a loop started
 * from inside a task, or two threads sharing the process-wide pool) or
 * threads <= 1, the caller runs every task itself. A worker that has not
 * joined by the time the caller takes the last task sits the loop out.
 * Under a stop (attn_pool_stop_use) it starts no task past the deadline.
 * Returns the number of threads that took part (>= 1). */
int attn_pool_run(int threads, int64_t ntasks, attn_pool_fn fn, void *arg);

#endif /* ATTN_POOL_H */
