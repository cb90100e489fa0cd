/* pool.c - the kernels' persistent thread pools: workers sleep on a
 * condition variable between loops and pull task numbers from atomic
 * counters while a loop runs (dynamic scheduling, so uneven tasks such as
 * causal query blocks balance themselves). A worker stays awake for a
 * millisecond after a loop (spinning briefly, then yielding the CPU to any
 * other runnable thread) before it sleeps, and the caller spins briefly
 * before waiting for the workers, because a multi-head request runs
 * several loops back to back, decode steps come every few hundred
 * microseconds, and a condition-variable wake-up costs tens of them.
 * After a long call (attn_pool_settle) they sleep at once: there the
 * wake-up is small beside the call, and the CPU a lingering worker holds
 * is what the caller needs next (a server encoding and sending an answer).
 *
 * A loop does not wait for a worker that has not joined it by the time the
 * caller has taken the last task: the loop closes then, and a worker that
 * wakes later sits it out. When the machine is busy, a woken worker can
 * wait a whole time slice for a CPU (or for the caller's own, when the
 * scheduler puts it there); waiting for it made a loop the caller could
 * finish alone several times slower.
 *
 * A lingering worker still holds its CPU in the scheduler's eyes, so a
 * caller woken later (a server thread woken by the network) can be put on
 * that same CPU while another one idles: the worker then waits behind the
 * caller for the whole loop, which the caller computes alone (a decode
 * step did so on a third of the steps of a server on 2 CPUs). A caller
 * that finds a lingering worker on its own CPU moves it off: the worker's
 * CPUs become those it started with but the caller's (Linux only).
 *
 * Tasks are handed out by CPU: the loop's tasks are cut into one
 * contiguous part per thread, and a thread takes the tasks of the part
 * its CPU names first (CPU number modulo the parts), then helps with the
 * others. So a task range runs on the same CPU from call to call whichever
 * thread calls: a decode step's keys and values of a head stay in that
 * CPU's caches between steps, although a server calls from whichever of
 * its threads took the request (a step at 4096 cached tokens took a third
 * longer when its caller changed CPUs between steps and the tasks went by
 * arrival).
 *
 * Every context owns a pool (attn_pool_new); the thread that computes with
 * a context makes its pool current (attn_pool_use) for the call, so two
 * threads with two contexts run on disjoint workers. Code that calls the
 * kernels without a context (tests, benches) gets the process-wide pool,
 * which serves one loop at a time. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX 64
#define SPIN 4000 /* pause polls before yielding: some tens of microseconds */
/* How long a worker stays awake after a loop, yielding to any other
 * runnable thread: a decode step comes every few hundred microseconds, a
 * condition-variable wake-up takes tens of them, and a worker that joins
 * late leaves the caller most of the loop (a step at 4096 cached tokens
 * took 0.54 ms instead of 0.28 on a server sleeping between steps). */
#define LINGER_NS 1000000
/* After a call this long, workers sleep at once instead of lingering
 * (attn_pool_settle): the tens of microseconds a lingering worker saves
 * the next call's first loop are then under 1% of a call, while the CPU
 * it holds is what the caller's own work after the call needs. Measured:
 * a server's answer to an 8 x 1024 x 64 scaled_dot (5.6 ms of compute,
 * then 2.8 MB of base64 to encode and send) took (wall - bare) / compute
 * 1.15-1.43 over four rounds with the workers lingering, 1.07-1.12 with
 * them asleep. */
#define REST_AFTER_NS 4000000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct {
    attn_pool *pool;
    int id;         /* 1..POOL_MAX */
    pthread_t th;
    uint64_t born;  /* the generation when it was created */
    _Atomic int cpu; /* the CPU it last lingered on, -1 while it sleeps */
#ifdef __linux__
    cpu_set_t home;  /* the CPUs it started with */
    int has_home;
#endif
} worker;

/* A part of a loop's tasks, [next, end), on a cache line of its own (the
 * pool is allocated 64-byte aligned). */
typedef struct {
    _Alignas(64) _Atomic int64_t next;
    int64_t end;
} part;

struct attn_pool {
    pthread_mutex_t busy;   /* held by the caller that owns the pool for a loop */
    pthread_mutex_t lock;   /* guards the fields below */
    pthread_cond_t wake;    /* a new loop (generation) started, or quit */
    pthread_cond_t done;    /* a worker finished its part */
    int max_workers;        /* threads - 1 of attn_pool_new, POOL_MAX for the process pool */
    int started;            /* worker threads created so far */
    int quit;
    unsigned forks;         /* fork_count when its locks and workers were made */
    uint64_t generation;
    int wanted;             /* workers 1..wanted may take part in this loop */
    int open;               /* workers may still join it */
    int joined;             /* workers that joined it */
    int finished;           /* of those, the ones done */
    attn_pool_fn fn;
    void *arg;
    attn_pool_stop *stop;   /* the caller's, or NULL */
    int parts;              /* the loop's parts: one a thread */
    part part[POOL_MAX + 1];
    _Atomic uint64_t gen_hint;    /* copies of generation and finished for */
    _Atomic int finished_hint;    /* spinning without the lock; the lock decides */
    _Atomic uint64_t rest_hint;   /* workers that saw this generation stop lingering */
    worker w[POOL_MAX + 1];
};

static attn_pool process_pool = {
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .max_workers = POOL_MAX,
};

static _Thread_local attn_pool *current;
static _Thread_local attn_pool_stop *current_stop;

/* Forks so far: a forked child has none of its parent's workers (and maybe
 * a lock held by a thread that is gone), so a pool started before the
 * fork starts over in the child. */
static _Atomic unsigned fork_count;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void sync_init(attn_pool *p)
{
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
}

/* In a forked child, a pool of the parent starts over with new locks and
 * no workers: the process pool at once, a context's at its next loop. */
static void restart_after_fork(attn_pool *p, unsigned forks)
{
    sync_init(p);
    p->started = 0;
    p->forks = forks;
}

static void after_fork(void)
{
    restart_after_fork(&process_pool, atomic_fetch_add(&fork_count, 1) + 1);
}

static void register_fork(void) { pthread_atfork(NULL, NULL, after_fork); }

attn_pool *attn_pool_new(int threads)
{
    pthread_once(&fork_once, register_fork);
    attn_pool *p = aligned_alloc(_Alignof(attn_pool), sizeof *p); /* its parts' cache lines */
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    sync_init(p);
    p->max_workers = threads - 1 < 0 ? 0 : threads - 1 > POOL_MAX ? POOL_MAX : threads - 1;
    p->forks = atomic_load(&fork_count);
    return p;
}

void attn_pool_free(attn_pool *p)
{
    if (!p)
        return;
    if (p->forks == atomic_load(&fork_count)) { /* its workers live in this process */
        pthread_mutex_lock(&p->lock);
        p->quit = 1;
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 1; i <= p->started; i++)
            pthread_join(p->w[i].th, NULL);
    }
    free(p);
}

attn_pool *attn_pool_use(attn_pool *p)
{
    attn_pool *prev = current;
    current = p;
    return prev;
}

static int this_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* Clock c in nanoseconds. */
static int64_t clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The pool's clock for stops: coarse where there is one (a read costs a
 * few nanoseconds, so every task can take one). */
static int64_t stop_clock_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    return clock_ns(CLOCK_MONOTONIC_COARSE);
#else
    return clock_ns(CLOCK_MONOTONIC);
#endif
}

#define POLL_EVERY_NS 1000000 /* how often a stop's poll is called */

int attn_pool_stop_arm(attn_pool_stop *s, int64_t limit_ns, attn_status (*poll)(void *),
                       void *poll_arg)
{
    int64_t now = stop_clock_ns();
    s->deadline_ns = limit_ns <= 0 ? INT64_MAX : limit_ns > INT64_MAX - now ? INT64_MAX : now + limit_ns;
    s->poll = poll;
    s->poll_arg = poll_arg;
    atomic_init(&s->next_poll_ns, now);
    atomic_init(&s->hit, ATTN_OK);
    return limit_ns > 0 || poll;
}

attn_pool_stop *attn_pool_stop_use(attn_pool_stop *s)
{
    attn_pool_stop *prev = current_stop;
    current_stop = s;
    return prev;
}

/* Stops s for st, unless it has stopped already (the first reason stays). */
static int stop_for(attn_pool_stop *s, attn_status st)
{
    int none = ATTN_OK;
    atomic_compare_exchange_strong(&s->hit, &none, (int)st);
    return 1;
}

/* Whether s's poll is due at now: the thread that takes the turn calls it,
 * and the others go on. */
static int poll_due(attn_pool_stop *s, int64_t now)
{
    int64_t due = atomic_load_explicit(&s->next_poll_ns, memory_order_relaxed);
    return now >= due && atomic_compare_exchange_strong(&s->next_poll_ns, &due, now + POLL_EVERY_NS);
}

/* Whether no more tasks are to start under s (NULL: none). */
static int stopped(attn_pool_stop *s)
{
    if (!s)
        return 0;
    if (atomic_load_explicit(&s->hit, memory_order_relaxed))
        return 1;
    int64_t now = stop_clock_ns();
    if (now >= s->deadline_ns)
        return stop_for(s, ATTN_ERR_TIMEOUT);
    if (s->poll && poll_due(s, now)) {
        attn_status st = s->poll(s->poll_arg);
        if (st != ATTN_OK)
            return stop_for(s, st);
    }
    return 0;
}

/* Runs tasks until none is left, or stop says so: those of the part this
 * thread's CPU names first, then the other parts' in turn (see the top of
 * the file). */
static void drain(attn_pool *p, attn_pool_fn fn, void *arg, attn_pool_stop *stop, int worker_id)
{
    int cpu = this_cpu(), n = p->parts;
    int home = (cpu >= 0 ? cpu : worker_id) % n;
    for (int i = 0; i < n; i++) {
        part *q = &p->part[(home + i) % n];
        while (!stopped(stop)) {
            int64_t t = atomic_fetch_add_explicit(&q->next, 1, memory_order_relaxed);
            if (t >= q->end) break;
            fn(arg, t, worker_id);
        }
    }
}

/* Cuts ntasks into p->parts contiguous parts of near-equal size. */
static void cut_parts(attn_pool *p, int64_t ntasks)
{
    for (int i = 0; i < p->parts; i++) {
        atomic_store_explicit(&p->part[i].next, ntasks * i / p->parts, memory_order_relaxed);
        p->part[i].end = ntasks * (i + 1) / p->parts;
    }
}

int64_t attn_pool_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* Moves workers 1..helpers that linger on the caller's CPU to their other
 * CPUs (see the top of the file). */
static void steer_workers(attn_pool *p, int helpers)
{
#ifdef __linux__
    int me = this_cpu();
    for (int i = 1; me >= 0 && i <= helpers; i++) {
        worker *w = &p->w[i];
        if (w->cpu != me || !w->has_home || !CPU_ISSET(me, &w->home))
            continue;
        cpu_set_t set = w->home;
        CPU_CLR(me, &set);
        if (CPU_COUNT(&set) > 0)
            pthread_setaffinity_np(w->th, sizeof set, &set); /* failure leaves it where it is */
    }
#else
    (void)p, (void)helpers;
#endif
}

/* Whether a worker that last saw generation seen should go on polling:
 * no new loop yet, and no attn_pool_settle since. */
static int still_idle(attn_pool *p, uint64_t seen)
{
    return atomic_load_explicit(&p->gen_hint, memory_order_acquire) == seen &&
           atomic_load_explicit(&p->rest_hint, memory_order_relaxed) != seen;
}

/* Polls for a generation after seen without the lock: SPIN pauses, then
 * yielding the CPU to any other runnable thread, LINGER_NS in all, unless
 * the caller settles the pool first. */
static void linger(attn_pool *p, worker *self, uint64_t seen)
{
    self->cpu = this_cpu();
    for (int s = 0; s < SPIN && still_idle(p, seen); s++)
        cpu_relax();
    int64_t end = attn_pool_now_ns() + LINGER_NS;
    while (still_idle(p, seen) && attn_pool_now_ns() < end) {
        sched_yield();
        self->cpu = this_cpu();
    }
    self->cpu = -1;
}

void attn_pool_settle(attn_pool *p, int64_t call_ns)
{
    if (p && call_ns >= REST_AFTER_NS)
        atomic_store_explicit(&p->rest_hint, atomic_load(&p->gen_hint), memory_order_relaxed);
}

/* Waits, lingering first, for a generation after seen (or quit); the lock
 * is held on entry and on return. */
static void await_loop(attn_pool *p, worker *self, uint64_t seen)
{
    if (p->generation == seen && !p->quit) {
        pthread_mutex_unlock(&p->lock);
        linger(p, self, seen);
        pthread_mutex_lock(&p->lock);
    }
    while (p->generation == seen && !p->quit)
        pthread_cond_wait(&p->wake, &p->lock);
}

static void *worker_main(void *arg)
{
    worker *self = arg;
    attn_pool *p = self->pool;
    pthread_mutex_lock(&p->lock);
    /* Not p->generation now: the loop that created this worker may have
     * started already, and it counts on this worker. */
    uint64_t seen = self->born;
    for (;;) {
        await_loop(p, self, seen);
        if (p->quit)
            break;
        seen = p->generation;
        if (self->id > p->wanted || !p->open) continue;
        p->joined++;
        attn_pool_fn fn = p->fn;
        void *a = p->arg;
        attn_pool_stop *stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        drain(p, fn, a, stop, self->id);
        pthread_mutex_lock(&p->lock);
        p->finished++;
        atomic_store_explicit(&p->finished_hint, p->finished, memory_order_release);
        pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Starts workers up to `helpers` (the lock is held); returns how many
 * there are. */
static int start_workers(attn_pool *p, int helpers)
{
    while (p->started < helpers) {
        worker *w = &p->w[p->started + 1];
        w->pool = p;
        w->id = p->started + 1;
        w->born = p->generation;
        w->cpu = -1;
#ifdef __linux__ /* a new thread starts with its creator's CPUs */
        w->has_home = pthread_getaffinity_np(pthread_self(), sizeof w->home, &w->home) == 0;
#endif
        if (pthread_create(&w->th, NULL, worker_main, w) != 0)
            break;
        p->started++;
    }
    return p->started < helpers ? p->started : helpers;
}

int attn_pool_run(int threads, int64_t ntasks, attn_pool_fn fn, void *arg)
{
    attn_pool *p = current ? current : &process_pool;
    if (threads - 1 > p->max_workers) threads = p->max_workers + 1;
    if (threads > ntasks) threads = (int)ntasks;
    unsigned forks = atomic_load(&fork_count);
    if (p->forks != forks)
        restart_after_fork(p, forks);
    if (threads <= 1 || pthread_mutex_trylock(&p->busy) != 0) {
        for (int64_t t = 0; t < ntasks && !stopped(current_stop); t++) fn(arg, t, 0);
        return 1;
    }
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&p->lock);
    int helpers = start_workers(p, threads - 1);
    steer_workers(p, helpers);
    p->fn = fn;
    p->arg = arg;
    p->stop = current_stop;
    p->wanted = helpers;
    p->open = 1;
    p->joined = 0;
    p->finished = 0;
    atomic_store(&p->finished_hint, 0);
    p->parts = helpers + 1;
    cut_parts(p, ntasks);
    p->generation++;
    atomic_store_explicit(&p->gen_hint, p->generation, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    drain(p, fn, arg, current_stop, 0);

    /* every task is taken: the workers in finish theirs, the others stay out */
    pthread_mutex_lock(&p->lock);
    p->open = 0;
    int joined = p->joined;
    pthread_mutex_unlock(&p->lock);
    for (int s = 0; s < SPIN && atomic_load_explicit(&p->finished_hint, memory_order_acquire) < joined; s++)
        cpu_relax();
    pthread_mutex_lock(&p->lock);
    while (p->finished < joined)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->busy);
    return joined + 1;
}
