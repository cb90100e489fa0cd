/* status.c - the version, status words, the checked size multiply and error formatting. */
#include <stdio.h>
#include <string.h>
#include "internal.h"

#define ATTN_STR(x) #x
#define ATTN_XSTR(x) ATTN_STR(x)

const char *attn_version(void)
{
    return ATTN_XSTR(ATTN_VERSION_MAJOR) "." ATTN_XSTR(ATTN_VERSION_MINOR) "." ATTN_XSTR(
        ATTN_VERSION_PATCH);
}

const char *attn_status_str(attn_status st)
{
    switch (st) {
    case ATTN_OK: return "ok";
    case ATTN_ERR_SHAPE: return "shape mismatch";
    case ATTN_ERR_PARAM: return "invalid parameter";
    case ATTN_ERR_TOO_LARGE: return "too large";
    case ATTN_ERR_NOMEM: return "out of memory";
    case ATTN_ERR_ARG: return "invalid argument";
    case ATTN_ERR_TIMEOUT: return "time limit passed";
    case ATTN_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}

int attn_size_mul(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0)
        return 0;
    if (a != 0 && b > INT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* Counts are later turned into bytes of float, so they are bounded by what
 * a size_t can address in floats as well as by int64. */
int attn_count(int rank, const int64_t *shape, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (!attn_size_mul(n, shape[i], &n))
            return 0;
    if ((uint64_t)n > SIZE_MAX / sizeof(float) / 4)
        return 0;
    *out = n;
    return 1;
}

attn_status attn_fail(attn_error *err, attn_status st, const char *field,
                      const char *fmt, ...)
{
    if (err) {
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *attn_param_field(char *buf, const char *name)
{
    snprintf(buf, 64, "params.%s", name ? name : "");
    return buf;
}

/* A rank outside 0..ATTN_MAX_RANK is the caller's garbage: only the
 * number is printed, never the sizes past the array's end. */
void attn_fmt_shape(char *buf, size_t n, int rank, const int64_t *shape)
{
    size_t used = 0;
    if (n == 0)
        return;
    buf[0] = '\0';
    if (rank < 0 || rank > ATTN_MAX_RANK) {
        snprintf(buf, n, "(rank %d)", rank);
        return;
    }
    used += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld",
                                 (long long)shape[i]);
    if (used < n)
        snprintf(buf + used, n - used, ")");
}
