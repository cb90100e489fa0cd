/* selftest.h - what the wire self-tests (test_wire.c, test_body.c) share:
 * the configuration the linker wants, pass/fail counting and a xorshift
 * generator seeded with SELFTEST_SEED (defined before the include). Each
 * is one program of one file, so the definitions live here. */
#ifndef SELFTEST_H
#define SELFTEST_H

#include "srv.h"

#include <stdint.h>
#include <stdio.h>

srv_config srv_cfg; /* the codec reads no field of it; the linker wants it */

static long passed, failed;
static uint64_t rng = SELFTEST_SEED;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Counts a check; prints the first 20 failures. */
static void check(int ok, const char *what, const char *detail)
{
    if (ok) {
        passed++;
    } else {
        if (failed < 20)
            printf("FAIL %s: %s\n", what, detail);
        failed++;
    }
}

#endif
