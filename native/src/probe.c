/* The speed probe (see probe.h for why and what). */
#include "probe.h"

#include <stdlib.h>
#include <time.h>

#define N 64                       /* matrix side: 3 x 16 KiB, fits L1/L2 */
#define PRODUCTS 12                /* matrix products per rep */
#define STREAM_FLOATS (1u << 20)   /* 4 MiB streamed per rep: larger than a core's L2 */

static float a[N * N], b[N * N], c[N * N];
static float stream[STREAM_FLOATS];
static int ready;
static double digest;

static void init_inputs(void) {
    /* fixed, exactly representable values: every call does identical arithmetic */
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)((i * 7) % 13) / 16.0f;
        b[i] = (float)((i * 5) % 11) / 16.0f;
    }
    for (unsigned i = 0; i < STREAM_FLOATS; i++) stream[i] = (float)(i % 97) / 128.0f;
    ready = 1;
}

static void product(void) {
    for (int i = 0; i < N; i++) {
        float *ci = c + i * N;
        for (int j = 0; j < N; j++) ci[j] = 0.0f;
        for (int k = 0; k < N; k++) {
            const float aik = a[i * N + k];
            const float *bk = b + k * N;
            for (int j = 0; j < N; j++) ci[j] += aik * bk[j];  /* vectorised inner loop */
        }
    }
}

static double sweep(void) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (unsigned i = 0; i < STREAM_FLOATS; i += 4) {
        s0 += stream[i]; s1 += stream[i + 1]; s2 += stream[i + 2]; s3 += stream[i + 3];
    }
    return (double)s0 + s1 + s2 + s3;
}

static int64_t now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double one_rep(void) {
    double d = 0;
    for (int p = 0; p < PRODUCTS; p++) {
        product();
        d += c[(p * 131) % (N * N)];
    }
    return d + sweep();
}

static int cmp_i64(const void *x, const void *y) {
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int64_t lb_probe_ns(int reps) {
    if (!ready) init_inputs();
    if (reps < 1) reps = 1;
    if (reps > PROBE_MAX_REPS) reps = PROBE_MAX_REPS;
    /* one untimed rep first: the measuring process just before (or after) evicted the
     * probe's buffers, and refilling the caches is not the speed being asked about */
    double d = one_rep();
    int64_t t[PROBE_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const int64_t t0 = now_ns();
        d += one_rep();
        const int64_t t1 = now_ns();
        if (t0 < 0 || t1 < 0) return -1;
        t[r] = t1 - t0;
    }
    digest = d;
    /* the median rep: an interrupt in one rep is not the machine's speed; a slow episode
     * slows them all */
    qsort(t, (size_t)reps, sizeof t[0], cmp_i64);
    return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

double lb_probe_digest(void) { return digest; }
