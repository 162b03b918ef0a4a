/* The speed probe: a fixed piece of work whose duration tells how fast the CPU it runs on
 * is right now (issue 18). This VM has episodes of about 10 s in which everything runs
 * about 1.75x slower while the guest sees no steal and no foreign CPU time; a measuring
 * process taken in one must be refused like a loaded one. The measure stage runs the probe
 * on the scenario's CPUs just before and just after each measuring process and compares
 * the two durations with the fastest probe it has seen (pipelines/speed_probe.py).
 *
 * The work mixes the two things a network's kernels do: dense float multiply-adds (a
 * 64x64 matrix product, vectorised by the compiler like a GEMM micro-kernel) and streaming
 * over a buffer larger than L2 (4 MiB), so a slow-down of either shows. It is the same
 * work on every call (fixed inputs, fixed sizes), about 0.6 ms a rep on this host's cores. */
#ifndef LATBENCH_PROBE_H
#define LATBENCH_PROBE_H

#include <stdint.h>

#define PROBE_MAX_REPS 64

/* Runs the fixed work once untimed (to refill the caches), then `reps` times, each timed
 * with CLOCK_MONOTONIC, and returns the median rep's nanoseconds (negative on a clock
 * failure). `reps` is clamped to [1, PROBE_MAX_REPS]. Not thread-safe: one probe at a
 * time per process (its buffers are static, so it allocates nothing). */
int64_t lb_probe_ns(int reps);

/* The probe's result digest of the last call (a sum over the product and the buffer): it
 * keeps the compiler from dropping the work, and tests check it does not change. */
double lb_probe_digest(void);

#endif
