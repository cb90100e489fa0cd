/* nn.c - the dense pieces around the attention: linear layers, LayerNorm, GRU cell, log-softmax. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


int mdl_fail(char *err, size_t errn, const char *fmt, ...)
{
    if (err && errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errn, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int mdl_lib_fail(mdl_run *r, const char *what, attn_status st, const attn_error *ae)
{
    return mdl_fail(r->err, r->errn, "%s: %s: %s (%s)", r->m->info.name, what, attn_status_str(st),
                    ae->message);
}

/* Four rows of X against one row of W at once: W is read once per 4 rows. */
static inline __attribute__((always_inline)) void linear_body(const float *X, int N, int in, const float *W,
                                                              const float *b, int out, float *Y, int ldy)
{
    for (int o = 0; o < out; o++) {
        const float *w = W + (size_t)o * in;
        float bias = b ? b[o] : 0.0f;
        int n = 0;
        for (; n + 4 <= N; n += 4) {
            const float *x0 = X + (size_t)n * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
            float a0[8] = {0}, a1[8] = {0}, a2[8] = {0}, a3[8] = {0};
            int i = 0;
            for (; i + 8 <= in; i += 8)
                for (int j = 0; j < 8; j++) {
                    a0[j] += w[i + j] * x0[i + j];
                    a1[j] += w[i + j] * x1[i + j];
                    a2[j] += w[i + j] * x2[i + j];
                    a3[j] += w[i + j] * x3[i + j];
                }
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int j = 0; j < 8; j++) {
                s0 += a0[j];
                s1 += a1[j];
                s2 += a2[j];
                s3 += a3[j];
            }
            for (; i < in; i++) {
                s0 += w[i] * x0[i];
                s1 += w[i] * x1[i];
                s2 += w[i] * x2[i];
                s3 += w[i] * x3[i];
            }
            Y[(size_t)n * ldy + o] = s0 + bias;
            Y[(size_t)(n + 1) * ldy + o] = s1 + bias;
            Y[(size_t)(n + 2) * ldy + o] = s2 + bias;
            Y[(size_t)(n + 3) * ldy + o] = s3 + bias;
        }
        for (; n < N; n++) {
            const float *x = X + (size_t)n * in;
            float a[8] = {0}, s = 0;
            int i = 0;
            for (; i + 8 <= in; i += 8)
                for (int j = 0; j < 8; j++)
                    a[j] += w[i + j] * x[i + j];
            for (int j = 0; j < 8; j++)
                s += a[j];
            for (; i < in; i++)
                s += w[i] * x[i];
            Y[(size_t)n * ldy + o] = s + bias;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Blocks of 4 outputs: 4 independent FMA chains per row of X, the block's
 * 4 rows of W stay in L1 across the N rows. */
__attribute__((target("avx2,fma"))) static void linear_avx2(const float *X, int N, int in, const float *W,
                                                            const float *b, int out, float *Y)
{
    int o = 0, in8 = in & ~7;
    for (; o + 4 <= out; o += 4) {
        const float *w0 = W + (size_t)o * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
        for (int n = 0; n < N; n++) {
            const float *x = X + (size_t)n * in;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int i = 0; i < in8; i += 8) {
                __m256 xv = _mm256_loadu_ps(x + i);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, a1);
                a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, a2);
                a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, a3);
            }
            float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);
            for (int i = in8; i < in; i++) {
                s0 += w0[i] * x[i];
                s1 += w1[i] * x[i];
                s2 += w2[i] * x[i];
                s3 += w3[i] * x[i];
            }
            float *y = Y + (size_t)n * out + o;
            y[0] = s0 + (b ? b[o] : 0.0f);
            y[1] = s1 + (b ? b[o + 1] : 0.0f);
            y[2] = s2 + (b ? b[o + 2] : 0.0f);
            y[3] = s3 + (b ? b[o + 3] : 0.0f);
        }
    }
    if (o < out)
        linear_body(X, N, in, W + (size_t)o * in, b ? b + o : NULL, out - o, Y + o, out);
}
#endif

static void linear_generic(const float *X, int N, int in, const float *W, const float *b, int out, float *Y)
{
    linear_body(X, N, in, W, b, out, Y, out);
}

void mdl_linear(const float *X, int N, int in, const float *W, const float *b, int out, float *Y)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static int have = -1; /* a benign race: every thread computes the same value */
    if (have < 0)
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (have) {
        linear_avx2(X, N, in, W, b, out, Y);
        return;
    }
#endif
    linear_generic(X, N, in, W, b, out, Y);
}

void mdl_add_norm(float *x, const float *d, int N, int E, const float *w, const float *b)
{
    for (int n = 0; n < N; n++) {
        float *row = x + (size_t)n * E;
        const float *dr = d + (size_t)n * E;
        double mean = 0, var = 0;
        for (int i = 0; i < E; i++) {
            row[i] += dr[i];
            mean += row[i];
        }
        mean /= E;
        for (int i = 0; i < E; i++)
            var += (row[i] - mean) * (row[i] - mean);
        var /= E;
        double inv = 1.0 / sqrt(var + 1e-5);
        for (int i = 0; i < E; i++)
            row[i] = (float)((row[i] - mean) * inv) * w[i] + b[i];
    }
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void mdl_gru_step(const mdl_gru_w *g, const float *x, int N, int in, int H, float *h, float *scratch)
{
    float *gi = scratch, *gh = scratch + (size_t)3 * N * H;
    mdl_linear(x, N, in, g->w_ih, g->b_ih, 3 * H, gi);
    mdl_linear(h, N, H, g->w_hh, g->b_hh, 3 * H, gh);
    for (int n = 0; n < N; n++) {
        const float *a = gi + (size_t)3 * n * H, *c = gh + (size_t)3 * n * H;
        float *hn = h + (size_t)n * H;
        for (int i = 0; i < H; i++) {
            float r = sigmoidf(a[i] + c[i]);
            float z = sigmoidf(a[H + i] + c[H + i]);
            float nn = tanhf(a[2 * H + i] + r * c[2 * H + i]);
            hn[i] = (1.0f - z) * nn + z * hn[i];
        }
    }
}

void mdl_log_softmax(float *x, int n)
{
    float mx = x[0];
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)(x[i] - mx));
    float ls = (float)log(s);
    for (int i = 0; i < n; i++)
        x[i] = x[i] - mx - ls;
}
