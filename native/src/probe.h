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
 * work on every call (fixed inputs, fixed sizes), about 3-5 ms on a 2020s x86 core. */
#ifndef LATBENCH_PROBE_H
#define LATBENCH_PROBE_H

#include <stdint.h>

/* Runs the fixed work `reps` times and returns the elapsed CLOCK_MONOTONIC nanoseconds
 * (negative on a clock failure). `reps` < 1 counts as 1. Not thread-safe: one probe at a
 * time per process (its buffers are static, so it allocates nothing). */
int64_t lb_probe_ns(int reps);

/* The probe's result digest of the last call (a sum over the product and the buffer): it
 * keeps the compiler from dropping the work, and tests check it does not change. */
double lb_probe_digest(void);

#endif
