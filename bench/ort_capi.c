/* ort_capi.c - times ONNX Runtime through its C API (dlopen'ed from the npm package) on bench/models.py's models, checking each output against this library's; prints one JSON object for bench/run.py.
 *
 * The npm package onnxruntime-node ships the CPU library (libonnxruntime.so.1)
 * but no C header, so the few types and the prefix of the OrtApi function
 * table used here are declared below, in the order of ONNX Runtime's
 * onnxruntime_c_api.h (the table only ever grows at its end, so the prefix is
 * the same in every version since 1.0; the API version asked for is the
 * library's own, from its version string). Sessions: the given number of
 * intra-op threads, one inter-op thread, sequential execution, all graph
 * optimisations (ORT_ENABLE_ALL). Inputs and outputs are bound to caller
 * buffers, as attn_compute's are, so each timed call is one OrtApi::Run.
 *
 * Every model runs once per shape with its output compared to this
 * library's public call on the same inputs (attn_compute for the core,
 * attn_mha_compute with the same seeded parameters for multi-head): a
 * difference above 1e-4 of the output's magnitude is printed to stderr as
 * ORT CHECK FAILED, recorded as "ok_<row>": 0, and the exit status is 1.
 *
 * Usage: ort_capi LIBONNXRUNTIME MODELDIR [threads [L ...]] */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ours.h"

/* ------------------------------------------------ the C API, as used */

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtValue OrtValue;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtRunOptions OrtRunOptions;
typedef void (*ort_slot)(void); /* an entry not used here */

enum { ORT_LOGGING_LEVEL_ERROR = 3, ORT_SEQUENTIAL = 0, ORT_ENABLE_ALL = 99,
       ORT_ARENA_ALLOCATOR = 1, ORT_MEM_TYPE_DEFAULT = 0, ORT_TENSOR_FLOAT = 1 };

typedef struct OrtApi {
    OrtStatus *(*CreateStatus)(int code, const char *msg);                             /* 0 */
    int (*GetErrorCode)(const OrtStatus *st);                                          /* 1 */
    const char *(*GetErrorMessage)(const OrtStatus *st);                               /* 2 */
    OrtStatus *(*CreateEnv)(int level, const char *logid, OrtEnv **out);               /* 3 */
    ort_slot unused4_6[3];   /* CreateEnvWithCustomLogger, Enable/DisableTelemetryEvents */
    OrtStatus *(*CreateSession)(const OrtEnv *env, const char *path,
                                const OrtSessionOptions *opt, OrtSession **out);       /* 7 */
    ort_slot unused8;        /* CreateSessionFromArray */
    OrtStatus *(*Run)(OrtSession *s, const OrtRunOptions *ro, const char *const *in_names,
                      const OrtValue *const *in, size_t n_in, const char *const *out_names,
                      size_t n_out, OrtValue **out);                                   /* 9 */
    OrtStatus *(*CreateSessionOptions)(OrtSessionOptions **out);                       /* 10 */
    ort_slot unused11_12[2]; /* SetOptimizedModelFilePath, CloneSessionOptions */
    OrtStatus *(*SetSessionExecutionMode)(OrtSessionOptions *o, int mode);             /* 13 */
    ort_slot unused14_22[9]; /* EnableProfiling .. SetSessionLogSeverityLevel */
    OrtStatus *(*SetSessionGraphOptimizationLevel)(OrtSessionOptions *o, int level);   /* 23 */
    OrtStatus *(*SetIntraOpNumThreads)(OrtSessionOptions *o, int n);                   /* 24 */
    OrtStatus *(*SetInterOpNumThreads)(OrtSessionOptions *o, int n);                   /* 25 */
    ort_slot unused26_48[23]; /* CreateCustomOpDomain .. CreateTensorAsOrtValue */
    OrtStatus *(*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo *mi, void *data, size_t bytes,
                                                 const int64_t *shape, size_t rank, int type,
                                                 OrtValue **out);                      /* 49 */
    ort_slot unused50_68[19]; /* IsTensor .. CreateMemoryInfo */
    OrtStatus *(*CreateCpuMemoryInfo)(int alloc_type, int mem_type, OrtMemoryInfo **out); /* 69 */
    ort_slot unused70_91[22]; /* CompareMemoryInfo .. KernelContext_GetOutput */
    void (*ReleaseEnv)(OrtEnv *p);                                                     /* 92 */
    void (*ReleaseStatus)(OrtStatus *p);                                               /* 93 */
    void (*ReleaseMemoryInfo)(OrtMemoryInfo *p);                                       /* 94 */
    void (*ReleaseSession)(OrtSession *p);                                             /* 95 */
    void (*ReleaseValue)(OrtValue *p);                                                 /* 96 */
    ort_slot unused97_99[3]; /* ReleaseRunOptions, ReleaseTypeInfo, ReleaseTensorTypeAndShapeInfo */
    void (*ReleaseSessionOptions)(OrtSessionOptions *p);                               /* 100 */
} OrtApi;

_Static_assert(offsetof(OrtApi, ReleaseSessionOptions) == 100 * sizeof(void (*)(void)),
               "OrtApi prefix out of step with onnxruntime_c_api.h");

typedef struct {
    const OrtApi *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

static const OrtApi *ort;
static OrtEnv *env;
static OrtMemoryInfo *cpu_mem;
static int threads = 2;
static int failures;

/* A failed call is fatal; the message says which. */
static void ok(OrtStatus *st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "ort_capi: %s: %s\n", what, ort->GetErrorMessage(st));
    exit(2);
}

/* Loads the library, asks for the API of its own version and checks the
 * table on a probe status (slots 0, 1, 2 and 93). */
static const char *ort_load(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "ort_capi: %s\n", dlerror()); exit(2); }
    const OrtApiBase *(*get_base)(void) = (const OrtApiBase *(*)(void))dlsym(h, "OrtGetApiBase");
    if (!get_base) { fprintf(stderr, "ort_capi: no OrtGetApiBase in %s\n", lib); exit(2); }
    const char *ver = get_base()->GetVersionString();
    unsigned major = 0, minor = 0;
    if (sscanf(ver, "%u.%u", &major, &minor) != 2 || major != 1 || !(ort = get_base()->GetApi(minor))) {
        fprintf(stderr, "ort_capi: ONNX Runtime %s: no C API of its own version\n", ver);
        exit(2);
    }
    OrtStatus *probe = ort->CreateStatus(2, "probe");
    if (ort->GetErrorCode(probe) != 2 || strcmp(ort->GetErrorMessage(probe), "probe") != 0) {
        fprintf(stderr, "ort_capi: the OrtApi table does not match these declarations\n");
        exit(2);
    }
    ort->ReleaseStatus(probe);
    ok(ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "bench", &env), "CreateEnv");
    ok(ort->CreateCpuMemoryInfo(ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &cpu_mem), "CreateCpuMemoryInfo");
    bench_emit_str("ort_version", ver);
    bench_emit("ort_api_version", minor);
    return ver;
}

/* A session on MODELDIR/name.onnx, or NULL with the reason in *why (a
 * model this ONNX Runtime cannot load is skipped, not fatal). */
static OrtSession *ort_session(const char *dir, const char *name, char *why, size_t why_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    OrtSessionOptions *o;
    ok(ort->CreateSessionOptions(&o), "CreateSessionOptions");
    ok(ort->SetIntraOpNumThreads(o, threads), "SetIntraOpNumThreads");
    ok(ort->SetInterOpNumThreads(o, 1), "SetInterOpNumThreads");
    ok(ort->SetSessionExecutionMode(o, ORT_SEQUENTIAL), "SetSessionExecutionMode");
    ok(ort->SetSessionGraphOptimizationLevel(o, ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
    OrtSession *s = NULL;
    OrtStatus *st = ort->CreateSession(env, path, o, &s);
    ort->ReleaseSessionOptions(o);
    if (st) {
        snprintf(why, why_len, "%s", ort->GetErrorMessage(st));
        ort->ReleaseStatus(st);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------- one model */

/* A session with its inputs and output bound to caller buffers. */
typedef struct {
    OrtSession *s;
    size_t n_in;
    const char *in_names[3];
    OrtValue *in[3], *out;
} ort_call;

static OrtValue *value(float *data, const int64_t *shape, size_t rank)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)shape[i];
    OrtValue *v = NULL;
    ok(ort->CreateTensorWithDataAsOrtValue(cpu_mem, data, n * sizeof(float), shape, rank,
                                           ORT_TENSOR_FLOAT, &v), "CreateTensorWithDataAsOrtValue");
    return v;
}

static void ort_run(void *arg)
{
    ort_call *c = arg;
    static const char *out_name[] = {"o"};
    ok(ort->Run(c->s, NULL, c->in_names, (const OrtValue *const *)c->in, c->n_in, out_name, 1, &c->out),
       "Run");
}

static void ort_call_free(ort_call *c)
{
    for (size_t i = 0; i < c->n_in; i++) ort->ReleaseValue(c->in[i]);
    ort->ReleaseValue(c->out);
}

/* Largest |got - want| over the largest |want| (at least 1): the check's
 * "relative-ish" error. NaN (an output ONNX Runtime did not write) fails. */
static double rel_diff(const float *got, const float *want, size_t n)
{
    double d = 0, m = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= d)) d = e; /* NaN sticks */
        if (fabs(want[i]) > m) m = fabs(want[i]);
    }
    return d / m;
}

/* Runs once and checks against `want`, then times; emits <key>,
 * diff_<key>, ok_<key>. */
static void check_and_time(const char *key, ort_call *c, float *out, const float *want, size_t n, int64_t l)
{
    for (size_t i = 0; i < n; i++) out[i] = NAN;
    ort_run(c);
    double d = rel_diff(out, want, n);
    char k[96];
    snprintf(k, sizeof k, "diff_%s", key);
    bench_emit(k, d);
    snprintf(k, sizeof k, "ok_%s", key);
    bench_emit(k, d <= 1e-4);
    if (!(d <= 1e-4)) {
        fprintf(stderr, "ort_capi: ORT CHECK FAILED: %s differs from this library by %.3g (limit 1e-4)\n", key, d);
        failures++;
    }
    bench_emit(key, bench_median(ort_run, c, bench_reps(l), 3.0));
}

/* ------------------------------------------------------------ rows */

typedef struct {
    const char *name; /* MODELDIR/<name>.onnx */
    OrtSession *s;    /* NULL: skipped, see why */
    char why[400];
} model;

enum { CORE_MHA, CORE_MHA_CAUSAL, CORE_SDPA, CORE_SDPA_CAUSAL, MHA_GRAPH, MHA_FUSED, N_MODELS };
static model models[N_MODELS] = {{"core_mha", 0, ""}, {"core_mha_causal", 0, ""}, {"core_sdpa", 0, ""},
                                 {"core_sdpa_causal", 0, ""}, {"mha_graph", 0, ""}, {"mha_fused", 0, ""}};

static float *buffer(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof *p + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "ort_capi: out of memory\n"); exit(2); }
    return p;
}

/* One form of the core: (1, L, E) for MultiHeadAttention, (1, H, L, 64) for
 * Attention-23; key <row>_<form>_<L>. */
static void core_form(model *m, const char *row, const char *form, int64_t l, int rank,
                      const int64_t *sq, const int64_t *sk, float *q, float *k, float *v,
                      const float *want, size_t nq)
{
    if (!m->s) return;
    float *out = buffer(nq);
    char key[96];
    snprintf(key, sizeof key, "%s_%s_%lld", row, form, (long long)l);
    ort_call c = {m->s, 3, {"q", "k", "v"},
                  {value(q, sq, (size_t)rank), value(k, sk, (size_t)rank), value(v, sk, (size_t)rank)},
                  value(out, sq, (size_t)rank)};
    check_and_time(key, &c, out, want, nq, l);
    ort_call_free(&c);
    free(out);
}

/* The attention core, Lq x Lk, in both forms, checked against ours_core. */
static void core_rows(const char *row, int64_t lq, int64_t lk, int causal)
{
    size_t nq = (size_t)lq * BENCH_E, nk = (size_t)lk * BENCH_E;
    float *q = bench_randf(nq, 1), *k = bench_randf(nk, 2), *v = bench_randf(nk, 3);
    float *qh = buffer(nq), *kh = buffer(nk), *vh = buffer(nk), *oh = buffer(nq), *want = buffer(nq);
    ours_to_heads(lq, q, qh);
    ours_to_heads(lk, k, kh);
    ours_to_heads(lk, v, vh);
    attn_ctx *ctx = attn_ctx_new(threads); /* freed before ONNX Runtime is timed */
    ours_core(ctx, lq, lk, qh, kh, vh, oh, NULL, causal);
    attn_ctx_free(ctx);
    ours_from_heads(lq, oh, want);
    int64_t l = lq > lk ? lq : lk;
    int64_t bq[3] = {1, lq, BENCH_E}, bk[3] = {1, lk, BENCH_E};
    int64_t hq[4] = {1, BENCH_H, lq, BENCH_D}, hk[4] = {1, BENCH_H, lk, BENCH_D};
    core_form(&models[causal ? CORE_MHA_CAUSAL : CORE_MHA], row, "mha", l, 3, bq, bk, q, k, v, want, nq);
    core_form(&models[causal ? CORE_SDPA_CAUSAL : CORE_SDPA], row, "sdpa", l, 4, hq, hk, qh, kh, vh, oh, nq);
    free(q); free(k); free(v); free(qh); free(kh); free(vh); free(oh); free(want);
}

/* Multi-head with projections, both graphs, checked against ours_mha. */
static void mha_rows(int64_t l)
{
    size_t n = (size_t)l * BENCH_E;
    float *x = bench_randf(n, 4), *want = buffer(n), *out = buffer(n);
    attn_param_set *ps = ours_mha_params(l, x);
    attn_ctx *ctx = attn_ctx_new(threads);
    ours_mha(ctx, l, x, ps, want);
    attn_ctx_free(ctx);
    attn_param_set_free(ps);
    int64_t shape[3] = {1, l, BENCH_E};
    for (int i = MHA_GRAPH; i <= MHA_FUSED; i++) {
        if (!models[i].s) continue;
        char key[96];
        snprintf(key, sizeof key, "%s_%lld", models[i].name, (long long)l);
        ort_call c = {models[i].s, 1, {"x", NULL, NULL}, {value(x, shape, 3), NULL, NULL}, value(out, shape, 3)};
        check_and_time(key, &c, out, want, n, l);
        ort_call_free(&c);
    }
    free(x); free(want); free(out);
}

static void open_models(const char *dir)
{
    for (int i = 0; i < N_MODELS; i++) {
        models[i].s = ort_session(dir, models[i].name, models[i].why, sizeof models[i].why);
        if (models[i].s) continue;
        char key[96];
        snprintf(key, sizeof key, "skip_%s", models[i].name);
        bench_emit_str(key, models[i].why);
        fprintf(stderr, "ort_capi: %s skipped: ONNX Runtime cannot load it: %s\n", models[i].name, models[i].why);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ort_capi LIBONNXRUNTIME MODELDIR [threads [L ...]]\n");
        return 2;
    }
    threads = argc > 3 ? atoi(argv[3]) : 2;
    if (threads < 1) threads = 1;
    int64_t ls[16] = {128, 512, 1024, 2048, 4096};
    int nls = 5;
    if (argc > 4)
        for (nls = 0; nls < 16 && 4 + nls < argc; nls++) ls[nls] = atoll(argv[4 + nls]);
    bench_open();
    ort_load(argv[1]);
    bench_emit("threads", threads);
    open_models(argv[2]);
    for (int i = 0; i < nls; i++) {
        core_rows("core", ls[i], ls[i], 0);
        core_rows("causal", ls[i], ls[i], 1);
        mha_rows(ls[i]);
    }
    if (argc <= 4) core_rows("decode", 1, 4096, 0);
    bench_emit("check_failures", failures);
    bench_close();
    for (int i = 0; i < N_MODELS; i++)
        if (models[i].s) ort->ReleaseSession(models[i].s);
    ort->ReleaseMemoryInfo(cpu_mem);
    ort->ReleaseEnv(env);
    return failures ? 1 : 0;
}
