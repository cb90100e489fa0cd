/* log.c - leveled log lines on stderr and the monotonic clock. */
#include "srv.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void srv_log(int level, const char *fmt, ...)
{
    if (level > srv_cfg.log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One fwrite per line so lines from worker threads do not interleave. */
    fwrite(line, 1, (size_t)n, stderr);
}

double srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
