/* tasks.c - work handed to the server's kept threads: a large request run
 * apart from its connection's polling thread (http.c), and the second
 * half of a big array being parsed (scan.c) or printed (codec.c) while
 * the request's own thread does the first.
 *
 * The threads wait for the next task instead of one being created per
 * task: a new thread costs its creation and its stack's pages, and on a
 * busy machine the scheduler starts it behind every thread already
 * running (2-5 ms at a load of 5 on 2 cores), where a woken one runs at
 * once. A task that finds no idle thread gets a new one, so a task never
 * waits behind another; the callers bound how many run at once (a large
 * request holds a compute slot, ATTN_MAX_INFLIGHT of them, and has at most
 * one half on the side). */
#include "srv.h"

#include <pthread.h>

enum { QUEUED, RUNNING, DONE, WITHDRAWN }; /* srv_task.state */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER; /* a task was queued */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* a settled task ended */
static srv_task *head, *tail; /* queued, first first */
static int queued, idle;

/* The next queued task, waiting for one (the lock is held). */
static srv_task *next_task(void)
{
    idle++;
    while (!head)
        pthread_cond_wait(&work, &mu);
    idle--;
    srv_task *t = head;
    head = t->next;
    if (!head)
        tail = NULL;
    queued--;
    return t;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        srv_task *t = next_task();
        t->state = RUNNING;
        /* an unsettled task may be gone once fn returns: read it first */
        int settled = t->settled;
        void (*fn)(void *) = t->fn;
        void *a = t->arg;
        pthread_mutex_unlock(&mu);
        fn(a);
        pthread_mutex_lock(&mu);
        if (settled) {
            t->state = DONE;
            pthread_cond_broadcast(&done);
        }
    }
    return NULL;
}

int srv_task_start(srv_task *t, void (*fn)(void *), void *arg, int settled)
{
    *t = (srv_task){fn, arg, NULL, QUEUED, settled};
    pthread_mutex_lock(&mu);
    if (idle <= queued) { /* every idle thread has its task: one more */
        pthread_attr_t attr;
        pthread_t th;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)1 << 20);
        int rc = pthread_create(&th, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            pthread_mutex_unlock(&mu);
            return -1;
        }
    }
    if (tail)
        tail->next = t;
    else
        head = t;
    tail = t;
    queued++;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Takes queued task t out of the queue (the lock is held). */
static void withdraw(srv_task *t)
{
    srv_task **at = &head, *prev = NULL;
    while (*at != t) {
        prev = *at;
        at = &(*at)->next;
    }
    *at = t->next;
    if (tail == t)
        tail = prev;
    queued--;
    t->state = WITHDRAWN;
}

int srv_task_settle(srv_task *t)
{
    pthread_mutex_lock(&mu);
    int ran = t->state != QUEUED;
    if (!ran)
        withdraw(t);
    while (t->state == RUNNING)
        pthread_cond_wait(&done, &mu);
    pthread_mutex_unlock(&mu);
    return ran;
}
