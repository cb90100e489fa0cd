/* peak.c - measures this machine's float32 FMA and bf16 dot-product peaks on 1 and N threads; prints one JSON object for bench/run.py.
 *
 * float32: 12 independent FMA chains per thread (AVX-512 zmm when the CPU and
 * OS have it, else AVX2+FMA ymm), 2 flops per lane per FMA. bf16: 12 chains
 * of vdpbf16ps (AVX512_BF16), 2 flops per bf16 pair, 32 pairs per zmm. Each
 * figure is the best of several timed runs (a peak is an upper bound, so the
 * best run is the estimate), threads pinned one per CPU; each figure comes
 * with the share of its span its threads actually ran (below ~0.95, other
 * work preempted them and the figure is low). Kernels carry
 * target attributes and are chosen at run time: on a CPU without the
 * instructions the figure is reported as null with the reason.
 *
 * It also measures what the library's float32 exponential (exp_soft,
 * lib/simd_math.h, as the AVX-512 kernels compile it) costs the
 * multiply-add units: one thread, the twelve FMA chains with one
 * exponential of an independent input added to each step. The steps'
 * extra time over the chains' own, in units of one FMA's share of it, is
 * "exp_units": the multiply-add slots an exponential of 16 floats takes
 * from the products around it (its other operations run beside them).
 *
 * Usage: peak [threads]   (default 2) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PEAK_X86 1
/* the library's own vector words and exponential, AVX-512 variant */
#include "simd_avx512.h"
#include "simd_math.h"
#endif

#define CHAINS 12

/* Twelve named accumulators (an array would live in memory at -O2), one
 * dependent operation each per step, and an empty asm that pins them in
 * registers so the compiler can neither merge nor drop a chain. */
#define STEP12(op) \
    do { x0 = op(x0); x1 = op(x1); x2 = op(x2); x3 = op(x3); x4 = op(x4); x5 = op(x5); \
         x6 = op(x6); x7 = op(x7); x8 = op(x8); x9 = op(x9); x10 = op(x10); x11 = op(x11); \
         __asm__ volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), \
                          "+v"(x6), "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11)); } while (0)
#define SUM12(add) add(add(add(add(x0, x1), add(x2, x3)), add(add(x4, x5), add(x6, x7))), \
                       add(add(x8, x9), add(x10, x11)))
#define ITERS 4000000L /* per thread per run: 48M instructions, ~10-30 ms */
#define RUNS 7

typedef double (*peak_kernel)(long iters); /* returns flops done */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink; /* keeps every chain's result live */

#ifdef PEAK_X86
/* A kernel: twelve chains of step(x) on vector type T from `one` for iters
 * steps; returns the flops done (flops per step of one chain). The vector
 * types and intrinsics differ by ISA, hence a macro. */
#define PEAK_KERNEL(name, isa, T, one, step, add, hsum, flops)                        \
    __attribute__((target(isa))) static double name(long iters)                      \
    {                                                                                 \
        T x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11;                           \
        x0 = x1 = x2 = x3 = x4 = x5 = x6 = x7 = x8 = x9 = x10 = x11 = one;            \
        for (long i = 0; i < iters; i++) STEP12(step);                                \
        sink = hsum(SUM12(add));                                                      \
        return (double)iters * CHAINS * (flops);                                      \
    }

/* acc = acc * a + b, a just below 1 so values stay finite. */
#define FMA512(x) _mm512_fmadd_ps(x, _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f))
#define FMA256(x) _mm256_fmadd_ps(x, _mm256_set1_ps(0.999999f), _mm256_set1_ps(1e-7f))
/* vdpbf16ps: per fp32 lane, acc += a[2i]*b[2i] + a[2i+1]*b[2i+1]; a = bf16
 * 1.0, b = bf16 ~6e-8. */
#define DOT16(x) _mm512_dpbf16_ps(x, (__m512bh)_mm512_set1_epi16(0x3f80), \
                                  (__m512bh)_mm512_set1_epi16(0x3380))

__attribute__((target("avx2"))) static inline float hsum_avx2(__m256 v)
{
    float out[8];
    _mm256_storeu_ps(out, v);
    return out[0] + out[7];
}

PEAK_KERNEL(fma_avx512, "avx512f", __m512, _mm512_set1_ps(1.0f), FMA512, _mm512_add_ps,
            _mm512_reduce_add_ps, 16 * 2)
PEAK_KERNEL(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps(1.0f), FMA256, _mm256_add_ps,
            hsum_avx2, 8 * 2)
PEAK_KERNEL(dot_bf16, "avx512f,avx512bf16", __m512, _mm512_set1_ps(1.0f), DOT16,
            _mm512_add_ps, _mm512_reduce_add_ps, 32 * 2)

/* The twelve chains, and one exponential a step on an input the compiler
 * cannot see through, summed so that it stays live (TGT: the library's
 * own AVX-512 target, under which exp_soft is compiled). */
TGT static double fma_exp_avx512(long iters)
{
    __m512 x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11;
    x0 = x1 = x2 = x3 = x4 = x5 = x6 = x7 = x8 = x9 = x10 = x11 = _mm512_set1_ps(1.0f);
    __m512 e = _mm512_set1_ps(-0.3f), s = _mm512_setzero_ps();
    for (long i = 0; i < iters; i++) {
        STEP12(FMA512);
        __m512 a = e;
        __asm__ volatile("" : "+v"(a));
        s = _mm512_add_ps(s, exp_soft(a));
    }
    sink = _mm512_reduce_add_ps(_mm512_add_ps(SUM12(_mm512_add_ps), s));
    return (double)iters * CHAINS * 16 * 2;
}

static int has_bf16(void)
{
    unsigned a, b, c, d;
    if (!__builtin_cpu_supports("avx512f")) return 0; /* also checks the OS saves zmm */
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1; /* CPUID.(7,1):EAX[5] = AVX512_BF16 */
}
#endif

/* ------------------------------------------------------------ threads */

typedef struct {
    peak_kernel fn;
    int cpu;
    pthread_barrier_t *start;
    double flops, t0, t1, cpu_s;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    w->fn(ITERS / 20); /* warm-up: clocks up, wide units powered */
    pthread_barrier_wait(w->start);
    w->t0 = now();
    double c0 = cpu_now();
    w->flops = w->fn(ITERS);
    w->cpu_s = cpu_now() - c0;
    w->t1 = now();
    return NULL;
}

/* One run on n threads: all flops over the span from the first thread's
 * start to the last one's end (each thread times itself, so a descheduled
 * main thread cannot shorten the span). */
typedef struct {
    double gflops, cpu_share; /* share: least CPU time / span of any thread */
} peak_run;

static peak_run run_once(peak_kernel fn, int n)
{
    pthread_t tid[64];
    worker w[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        w[i] = (worker){fn, i, &start, 0, 0, 0, 0};
        pthread_create(&tid[i], NULL, work, &w[i]);
    }
    pthread_barrier_wait(&start);
    double t0 = 1e300, t1 = 0, flops = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        flops += w[i].flops;
        if (w[i].t0 < t0) t0 = w[i].t0;
        if (w[i].t1 > t1) t1 = w[i].t1;
    }
    double t = t1 - t0, share = 1;
    for (int i = 0; i < n; i++)
        if (w[i].cpu_s / t < share) share = w[i].cpu_s / t;
    pthread_barrier_destroy(&start);
    return (peak_run){flops / t / 1e9, share};
}

static peak_run best_of(peak_kernel fn, int n)
{
    peak_run best = {0, 0};
    for (int r = 0; r < RUNS; r++) {
        peak_run p = run_once(fn, n);
        if (p.gflops > best.gflops) best = p;
    }
    return best;
}

static void emit(const char *key, peak_kernel fn, int n, const char *why)
{
    if (fn) {
        peak_run p = best_of(fn, n);
        printf(", \"%s\": %.1f, \"%s_cpu_share\": %.2f", key, p.gflops, key, p.cpu_share);
    }
    else printf(", \"%s\": null, \"%s_why\": \"%s\"", key, key, why);
    fflush(stdout);
}

/* exp_units (see the top): the chains alone (plain) and with the
 * exponentials, each the best of RUNS runs on one thread, in turns. */
static void emit_exp_units(peak_kernel plain, peak_kernel with_exp)
{
    if (!with_exp) {
        printf(", \"exp_units\": null, \"exp_units_why\": \"measured for the AVX-512 kernels only\"");
        return;
    }
    double alone = 0, with = 0;
    for (int r = 0; r < 2; r++) {
        peak_run a = best_of(plain, 1), b = best_of(with_exp, 1);
        if (a.gflops > alone) alone = a.gflops;
        if (b.gflops > with) with = b.gflops;
    }
    printf(", \"exp_units\": %.2f", CHAINS * (alone / with - 1.0));
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (n < 1 || n > 64) n = 2;
    peak_kernel f32 = NULL, bf16 = NULL, f32_exp = NULL;
    const char *isa = "none", *why32 = "not an x86-64 CPU", *why16 = why32;
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) { f32 = fma_avx512; f32_exp = fma_exp_avx512; isa = "avx512 (zmm)"; }
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { f32 = fma_avx2; isa = "avx2+fma (ymm)"; }
    else why32 = "the CPU has neither AVX-512 nor AVX2+FMA";
    if (has_bf16()) bf16 = dot_bf16;
    else why16 = "the CPU has no AVX512_BF16 (vdpbf16ps)";
#endif
    printf("{\"threads\": %d, \"chains\": %d, \"fp32_isa\": \"%s\"", n, CHAINS, isa);
    emit("fp32_1t", f32, 1, why32);
    emit("fp32_nt", f32, n, why32);
    emit("bf16_1t", bf16, 1, why16);
    emit("bf16_nt", bf16, n, why16);
    emit_exp_units(f32, f32_exp);
    printf("}\n");
    return 0;
}
