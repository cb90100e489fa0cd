/* amx.c - the AMX tile unit for the bf16 kernel (kernels_isa.h): detection
 * (CPUID, the kernel's grant of tile data through arch_prctl), the tile
 * configuration, and the two products of a flash block in TDPBF16PS tiles
 * (Intel SDM vol. 1 ch. 3 "Intel AMX", and the Linux kernel's
 * Documentation/arch/x86/xstate.rst for the permission). */
#include "kernels_isa.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define AMX __attribute__((target("amx-tile,amx-bf16")))
#define ROW 256 /* bytes of a 64-lane row of st, ot, qt2 and pt2 */

static int probe(void)
{
    const char *env = getenv("ATTN_AMX");
    unsigned a, b, c, d;
    if (env && strcmp(env, "0") == 0) return -1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return -1;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return -1; /* AMX-BF16, AMX-TILE */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
}

static int state; /* 0: not asked yet, 1: ready, -1: not */

void attn_amx_set(int on)
{
    __atomic_store_n(&state, on ? probe() : -1, __ATOMIC_RELEASE);
}

int attn_amx_ready(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) { /* two threads may both ask: the grant is idempotent */
        s = probe();
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* Palette 1, tiles 0-5 of 16 rows x 64 bytes: 0-3 accumulate, 4 and 5 load. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* A static object, not a local: the compiler's ldtilecfg operand names
 * only the first bytes, so stores to a local's later fields may be dropped
 * as dead (GCC 12). */
static const tile_config config __attribute__((aligned(64))) = {
    1, 0, {0}, {64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16}};

AMX void attn_amx_begin(void)
{
    _tile_loadconfig(&config);
}

AMX void attn_amx_end(void)
{
    _tile_release();
}

/* Tiles 0-3 += tile 4 (A) times the four B tiles of b (16 lanes apart). */
#define DP4(b)                                              \
    do {                                                    \
        _tile_loadd(5, (b), ROW); _tile_dpbf16ps(0, 4, 5);  \
        _tile_loadd(5, (b) + 16, ROW); _tile_dpbf16ps(1, 4, 5); \
        _tile_loadd(5, (b) + 32, ROW); _tile_dpbf16ps(2, 4, 5); \
        _tile_loadd(5, (b) + 48, ROW); _tile_dpbf16ps(3, 4, 5); \
    } while (0)

AMX void attn_amx_scores(const uint32_t *kb, int64_t ldk, const uint32_t *qt2, int nk, float *st)
{
    for (int k = 0; k < nk; k += 16) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int64_t p = 0; p < ldk; p += 16) {
            _tile_loadd(4, kb + k * ldk + p, ldk * 4);
            DP4(qt2 + p * 64);
        }
        float *c = st + k * 64;
        _tile_stored(0, c, ROW); _tile_stored(1, c + 16, ROW);
        _tile_stored(2, c + 32, ROW); _tile_stored(3, c + 48, ROW);
    }
}

AMX void attn_amx_pv(const uint32_t *vt, int64_t ldv, int np2, const uint32_t *pt2, int64_t dv,
                     float *ot)
{
    for (int64_t c = 0; c < dv; c += 16) {
        float *o = ot + c * 64;
        _tile_loadd(0, o, ROW); _tile_loadd(1, o + 16, ROW);
        _tile_loadd(2, o + 32, ROW); _tile_loadd(3, o + 48, ROW);
        for (int t = 0; t < np2; t += 16) {
            _tile_loadd(4, vt + c * ldv + t, ldv * 4);
            DP4(pt2 + t * 64);
        }
        _tile_stored(0, o, ROW); _tile_stored(1, o + 16, ROW);
        _tile_stored(2, o + 32, ROW); _tile_stored(3, o + 48, ROW);
    }
}

#else /* no AMX on this build: never ready, so the others are never called */

int attn_amx_ready(void) { return 0; }
void attn_amx_set(int on) { (void)on; }
void attn_amx_begin(void) {}
void attn_amx_end(void) {}
void attn_amx_scores(const uint32_t *kb, int64_t ldk, const uint32_t *qt2, int nk, float *st)
{
    (void)kb; (void)ldk; (void)qt2; (void)nk; (void)st;
}
void attn_amx_pv(const uint32_t *vt, int64_t ldv, int np2, const uint32_t *pt2, int64_t dv,
                 float *ot)
{
    (void)vt; (void)ldv; (void)np2; (void)pt2; (void)dv; (void)ot;
}

#endif
