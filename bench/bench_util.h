/* bench_util.h - the timing, input and JSON-output helpers the bench programs share (bench_kernels.c and ort_capi.c, so both sides are timed alike; bench_wire.c and modern.c for their clocks). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of this process: each of its threads' own CPU clock, read
 * by thread id, summed. Not CLOCK_PROCESS_CPUTIME_ID: Linux adds to that
 * the time of a thread running on another CPU only at a scheduler tick or
 * when the thread stops, so a call of a few milliseconds on two busy
 * threads can read as one thread's time (measured on the 2-vCPU Zen 5: the
 * process clock gave 1.01-1.98 times the wall time of 3 ms calls with both
 * threads busy, these sums 1.98-2.02). A thread's clock is exact while it
 * runs. Its id is the kernel's encoding that glibc's
 * pthread_getcpuclockid makes: ~tid << 3, per thread (4), scheduler
 * time (2). The threads must outlive the interval (a pool's do). A
 * reading costs its caller about 7 us of CPU, part of it inside the
 * interval: for calls of a millisecond and more. Without /proc, the
 * process clock. */
static inline double bench_cpu_now(void)
{
    struct timespec ts;
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    double s = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid <= 0)
            continue;
        clockid_t c = (clockid_t)((~(unsigned)tid << 3) | 6u);
        if (clock_gettime(c, &ts) == 0)
            s += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    closedir(d);
    return s;
}

/* p[0..n) uniform in [-1, 1), from a xorshift stream keyed by `key`:
 * both programs make the same inputs for the same key. */
static inline float *bench_fill(float *p, size_t n, uint64_t key)
{
    if (!p) { fprintf(stderr, "bench: out of memory\n"); exit(2); }
    uint64_t s = 88172645463325252ull + key * 0x9e3779b97f4a7c15ull + n;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        p[i] = (float)((double)(s >> 40) * 0x1p-24 * 2.0 - 1.0);
    }
    return p;
}

/* n such floats, 64-byte aligned (as a caller that cares for speed
 * allocates). */
static inline float *bench_randf(size_t n, uint64_t key)
{
    return bench_fill(aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64), n, key);
}

/* The same floats in memory aligned to 2 MB and asked to be backed by
 * transparent huge pages (madvise, a hint), as the library's KV cache
 * holds a session's keys and values. */
static inline float *bench_randf_huge(size_t n, uint64_t key)
{
    size_t huge = (size_t)2 << 20, bytes = (n * sizeof(float) + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, bytes) != 0) p = NULL;
#ifdef MADV_HUGEPAGE
    else madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return bench_fill(p, n, key);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of up to `reps` timed runs after warming up, stopping early once
 * `budget` seconds are spent (never fewer than three timed runs). The
 * warm-up runs for BENCH_WARM_S (at least once): a thread pool's new
 * workers start on their creator's CPU and the scheduler takes some
 * milliseconds to spread them, so the first calls after a pool starts can
 * run on one CPU (the core at L = 128 took 0.18 ms in 17 calls right after
 * its context was made, 0.10 after 20 ms of calls). Ours and ORT alike. */
#define BENCH_WARM_S 0.05
typedef void (*bench_fn)(void *);
static inline double bench_median(bench_fn fn, void *arg, int reps, double budget)
{
    double t[64] = {0};
    int n = 0;
    double warm = bench_now();
    do fn(arg);
    while (bench_now() - warm < BENCH_WARM_S);
    double start = bench_now();
    while (n < reps && n < 64) {
        double t0 = bench_now();
        fn(arg);
        t[n++] = bench_now() - t0;
        if (bench_now() - start > budget && n >= 3) break;
    }
    qsort(t, (size_t)n, sizeof t[0], bench_cmp_double);
    return t[n / 2];
}

/* Repetitions for a length: more for short runs. */
static inline int bench_reps(int64_t l) { return l <= 1024 ? 15 : 7; }

/* One JSON object on stdout, a field at a time (flushed, so a crash keeps
 * what was measured). bench_open first, bench_close last. */
static int bench_first_field = 1;
static inline void bench_open(void) { printf("{"); bench_first_field = 1; }
static inline void bench_close(void) { printf("}\n"); fflush(stdout); }
static inline void bench_key(const char *key)
{
    printf("%s\"%s\": ", bench_first_field ? "" : ", ", key);
    bench_first_field = 0;
}
static inline void bench_emit(const char *key, double v)
{
    bench_key(key);
    printf("%.9g", v);
    fflush(stdout);
}
/* A string value; quotes, backslashes and control characters become spaces. */
static inline void bench_emit_str(const char *key, const char *v)
{
    bench_key(key);
    putchar('"');
    for (const char *c = v ? v : ""; *c; c++)
        putchar(*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 ? ' ' : *c);
    putchar('"');
    fflush(stdout);
}

#endif /* BENCH_UTIL_H */
