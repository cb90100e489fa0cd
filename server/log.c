/* log.c - leveled log lines on stderr ("TIME LEVEL text"), batched: a write
 * per line would cost a quarter of a small request's time, so info lines
 * (the access log) wait in a buffer that main flushes every 100 ms;
 * warnings and errors go out at once. Also the monotonic clock. */
#include "srv.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char pending[64 * 1024];
static size_t used;

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(STDERR_FILENO, p, n);
        if (k <= 0)
            return; /* nowhere to log to: drop rather than spin */
        p += k;
        n -= (size_t)k;
    }
}

/* Formats fmt, cut to leave room for tail (written whole after it), and
 * writes the line: at most 1022 bytes, as srv_log_line keeps. */
static void log_v(int level, const char *tail, const char *fmt, va_list ap)
{
    char line[1024];
    size_t tl = strlen(tail), room = sizeof line - 1 - tl;
    int n = vsnprintf(line, room, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n >= room)
        n = (int)room - 1;
    memcpy(line + n, tail, tl);
    srv_log_line(level, line, (size_t)n + tl);
}

void srv_log(int level, const char *fmt, ...)
{
    if (level > srv_cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_v(level, "", fmt, ap);
    va_end(ap);
}

/* "2026-12-05T17:35:01.123Z ": the UTC time a line is written, to the
 * millisecond; the date and second formatted once a second per thread. */
enum { STAMP = 25 };
static void stamp(char out[STAMP])
{
    static _Thread_local time_t last = -1;
    static _Thread_local char sec[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != last) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
        last = ts.tv_sec;
    }
    long ms = ts.tv_nsec / 1000000;
    memcpy(out, sec, 19);
    out[19] = '.';
    out[20] = (char)('0' + ms / 100);
    out[21] = (char)('0' + ms / 10 % 10);
    out[22] = (char)('0' + ms % 10);
    out[23] = 'Z';
    out[24] = ' ';
}

/* The level's word and the space after it. */
static const char *const level_word[] = {"notice ", "error ", "warn ", "info "};

void srv_log_line(int level, const char *line, size_t n)
{
    if (level > srv_cfg.log_level || level < SRV_LOG_NOTICE)
        return;
    if (n > 1022)
        n = 1022; /* as srv_log's line buffer */
    char when[STAMP];
    stamp(when);
    const char *word = level_word[level - SRV_LOG_NOTICE];
    size_t wl = strlen(word);
    pthread_mutex_lock(&mu);
    if (used + STAMP + wl + n + 1 > sizeof pending) {
        write_all(pending, used);
        used = 0;
    }
    memcpy(pending + used, when, STAMP);
    used += STAMP;
    memcpy(pending + used, word, wl);
    used += wl;
    memcpy(pending + used, line, n);
    used += n;
    pending[used++] = '\n';
    if (level <= SRV_LOG_WARN) {
        write_all(pending, used);
        used = 0;
    }
    pthread_mutex_unlock(&mu);
}

/* Warnings that clients can cause (5xx answers, refused connections): at
 * most CAPPED_PER_SECOND a second from all callers together, so that a
 * flood cannot turn into a write per request; the next one let through, or
 * main's tick once the second is over, says how many were left out. */
enum { CAPPED_PER_SECOND = 10 };
static time_t capped_second;
static int capped_lines, capped_dropped;

/* Under mu: starts a new second when ts is in one; whether a line may go
 * out now, and then the count left out before it (reset). */
static int capped_take(const struct timespec *ts, int *dropped)
{
    if (ts->tv_sec != capped_second) {
        capped_second = ts->tv_sec;
        capped_lines = 0;
    }
    if (capped_lines >= CAPPED_PER_SECOND) {
        capped_dropped++;
        return 0;
    }
    capped_lines++;
    *dropped = capped_dropped;
    capped_dropped = 0;
    return 1;
}

void srv_warn_capped(const char *fmt, ...)
{
    if (SRV_LOG_WARN > srv_cfg.log_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int dropped = 0;
    pthread_mutex_lock(&mu);
    int go = capped_take(&ts, &dropped);
    pthread_mutex_unlock(&mu);
    if (!go)
        return;
    char tail[64] = "";
    if (dropped)
        snprintf(tail, sizeof tail, " (and %d such lines left out)", dropped);
    va_list ap;
    va_start(ap, fmt);
    log_v(SRV_LOG_WARN, tail, fmt, ap);
    va_end(ap);
}

void srv_warn_capped_report(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int dropped = 0;
    pthread_mutex_lock(&mu);
    if (capped_dropped && ts.tv_sec != capped_second) {
        dropped = capped_dropped;
        capped_dropped = 0;
    }
    pthread_mutex_unlock(&mu);
    if (dropped)
        srv_log(SRV_LOG_WARN, "(and %d more such lines left out)", dropped);
}

void srv_log_flush(void)
{
    pthread_mutex_lock(&mu);
    write_all(pending, used);
    used = 0;
    pthread_mutex_unlock(&mu);
}

double srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
