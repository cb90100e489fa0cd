/* pool.c - the kernels' persistent thread pool: workers sleep on a
 * condition variable between loops and pull task numbers from an atomic
 * counter while a loop runs (dynamic scheduling, so uneven tasks such as
 * causal query blocks balance themselves). A worker spins briefly before
 * sleeping, and so does the caller before waiting for the workers, because
 * a multi-head request runs several loops back to back and a condition
 * variable wake-up costs tens of microseconds. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define POOL_MAX 64
#define SPIN 4000 /* polls before sleeping: some tens of microseconds */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static struct {
    pthread_mutex_t busy;   /* held by the caller that owns the pool for a loop */
    pthread_mutex_t lock;   /* guards the fields below */
    pthread_cond_t wake;    /* a new loop (generation) started */
    pthread_cond_t done;    /* a worker finished its part */
    int started;            /* worker threads created so far */
    uint64_t generation;
    int wanted;             /* workers 1..wanted take part in this loop */
    int finished;
    attn_pool_fn fn;
    void *arg;
    int64_t ntasks;
    _Atomic int64_t next;
    uint64_t born[POOL_MAX + 1]; /* generation when each worker was created */
    _Atomic uint64_t gen_hint;    /* copies of generation and finished for */
    _Atomic int finished_hint;    /* spinning without the lock; the lock decides */
} pool = {
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static void drain(attn_pool_fn fn, void *arg, int64_t ntasks, int worker)
{
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
        if (t >= ntasks) break;
        fn(arg, t, worker);
    }
}

static void *worker_main(void *p)
{
    int id = (int)(intptr_t)p;
    pthread_mutex_lock(&pool.lock);
    /* Not pool.generation now: the loop that created this worker may have
     * started already, and it counts on this worker. */
    uint64_t seen = pool.born[id];
    for (;;) {
        if (pool.generation == seen) {
            pthread_mutex_unlock(&pool.lock);
            for (int s = 0; s < SPIN && atomic_load_explicit(&pool.gen_hint, memory_order_acquire) == seen; s++)
                cpu_relax();
            pthread_mutex_lock(&pool.lock);
        }
        while (pool.generation == seen)
            pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        if (id > pool.wanted) continue;
        attn_pool_fn fn = pool.fn;
        void *arg = pool.arg;
        int64_t n = pool.ntasks;
        pthread_mutex_unlock(&pool.lock);
        drain(fn, arg, n, id);
        pthread_mutex_lock(&pool.lock);
        pool.finished++;
        atomic_store_explicit(&pool.finished_hint, pool.finished, memory_order_release);
        pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A forked child has none of the parent's workers (and maybe a lock held
 * by a thread that is gone): it starts over with an empty pool. */
static void pool_after_fork(void)
{
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.started = 0;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_fork(void)
{
    pthread_atfork(NULL, NULL, pool_after_fork);
}

int attn_pool_run(int threads, int64_t ntasks, attn_pool_fn fn, void *arg)
{
    if (threads > POOL_MAX) threads = POOL_MAX;
    if (threads > ntasks) threads = (int)ntasks;
    if (threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        for (int64_t t = 0; t < ntasks; t++) fn(arg, t, 0);
        return 1;
    }
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&pool.lock);
    /* Workers are created on first need and then live for the process. */
    while (pool.started < threads - 1) {
        pthread_t th;
        pthread_attr_t at;
        pool.born[pool.started + 1] = pool.generation;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, worker_main, (void *)(intptr_t)(pool.started + 1));
        pthread_attr_destroy(&at);
        if (rc != 0) break;
        pool.started++;
    }
    int helpers = pool.started < threads - 1 ? pool.started : threads - 1;
    pool.fn = fn;
    pool.arg = arg;
    pool.ntasks = ntasks;
    pool.wanted = helpers;
    pool.finished = 0;
    atomic_store(&pool.finished_hint, 0);
    atomic_store(&pool.next, 0);
    pool.generation++;
    atomic_store_explicit(&pool.gen_hint, pool.generation, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    drain(fn, arg, ntasks, 0);

    for (int s = 0; s < SPIN && atomic_load_explicit(&pool.finished_hint, memory_order_acquire) < helpers; s++)
        cpu_relax();
    pthread_mutex_lock(&pool.lock);
    while (pool.finished < helpers)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
    return helpers + 1;
}
