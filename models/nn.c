/* nn.c - the dense pieces around the attention: linear layers, LayerNorm, GRU cell, log-softmax. */
#include "internal.h"
#include "kernels.h"

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
    r->lib_st = st;
    return mdl_fail(r->err, r->errn, "%s: %s: %s (%s)", r->m->info.name, what, attn_status_str(st),
                    ae->message);
}

/* Y = X W^T + b (nn.Linear), one thread: the library's product for few rows
 * (few rows x many outputs is what a decoder step needs). */
void mdl_linear(const float *X, int N, int in, const float *W, const float *b, int out, float *Y)
{
    attn_gemm_nt(N, out, in, X, in, W, in, b, Y, out, 1, NULL);
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
    float ls = logf(attn_sum_exp(x, n, mx));
    for (int i = 0; i < n; i++)
        x[i] = x[i] - mx - ls;
}
