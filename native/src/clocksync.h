/* GPU -> CPU clock synchronization from enqueue timestamp pairs (nnPerf, SenSys'23,
 * section 3.2.2, Algorithm 1 "Dynamic Fitting Strategy", and the kernel injector's
 * two-sigma bootstrap, Eq. 2).
 *
 * Each pair is (t, tau): the host clock (CLOCK_MONOTONIC ns) when a command buffer was
 * handed to the driver, and the GPU clock (ns of the GPU time base) when the GPU started
 * it. The model is tau = a * t + b (offset b, drift a - 1); a GPU timestamp g maps to the
 * host clock as (g - b) / a. As in Algorithm 1:
 *   - a pair whose residual |tau - (a t + b)| exceeds sigma is an outlier: it is not
 *     queued, the previous fit stays (lines 14-16);
 *   - accepted pairs go into a window; after every k observed pairs the fit is redone by
 *     linear least squares on the window, and the window is cleared (lines 7-11);
 *   - the bootstrap (cs_bootstrap) takes the pairs of n >= 2 injected empty command
 *     buffers: offsets d_i = tau_i - t_i, m their mean, sigma = 2 sqrt(mean (d_i - m)^2)
 *     (Eq. 2, the two-sigma rule), first fit a = 1, b = m.
 *
 * Choices the paper leaves open, made here:
 *   - residuals are measured against the current fit (the paper's |tau - t| <= sigma
 *     assumes a near-zero offset);
 *   - sigma is renewed at each refit with the two-sigma rule from the residuals of the
 *     last max(k, CS_SIGMA_PAIRS) observed pairs, accepted or not (once k are there), with
 *     a robust standard deviation measured about the fit: the lower quartile of
 *     |residual| / 0.3186 (the standard deviation for normal residuals). The accepted
 *     pairs alone are truncated at sigma and would shrink it refit after refit until
 *     almost every pair is rejected; a plain standard deviation would be inflated by the
 *     stalls; a spread about the residuals' own median (MAD) would lock a stale fit out
 *     for ever (residuals 30 +- 5 us give sigma 10 us and no pair is accepted again),
 *     while the spread about the fit widens sigma until pairs are accepted and the next
 *     refit re-anchors the line. The lower quartile rather than the median because under
 *     CPU load most pairs can be stalls (on lavapipe next to a busy loop, 7 of the first 9
 *     idle pairs were 0.5-5 ms late: a median-based sigma of 6 ms let a 5 ms stall in and
 *     moved the offset by 0.6 ms); it holds until 75% of the pairs are stalls. 32 pairs
 *     rather than one period of k keep sigma steady. Never below sigma_floor_ns, and at
 *     most twice the previous sigma (a slew limit: a stale fit still opens it within a
 *     few periods, a burst of stalls such as the warm-up runs' pairs cannot at once);
 *   - the k-th observed pair ends the period even when it is itself an outlier (n counts
 *     every observed pair, Algorithm 1 line 4): the accepted pairs of the period are
 *     fitted then, instead of waiting another k pairs for an accepted one;
 *   - the slope and the offset are estimated over different spans (the "slope history").
 *     The window's least squares keeps its role for the offset: at each refit the line is
 *     re-anchored on the window's pairs, b = mean(tau) - a mean(t) over the window, so the
 *     offset follows the clocks within k pairs. The slope, however, is not taken from the
 *     window: k pairs span a few tens of milliseconds, and with ~10 us of queue wake-up
 *     jitter their slope is off by ~1e-4, i.e. 100 us per second of extrapolation (on a
 *     real lavapipe stream the literal reading gave a = 1.00018 after 30 runs for a true
 *     slope of 1). Instead the accepted pairs also enter a weighted least-squares
 *     history with exponential forgetting (time constant
 *     history_ns of host time, default 10 s, so a drift that changes with temperature is
 *     still followed, about two time constants late); its standard error shrinks as
 *     jitter / (span sqrt(pairs)), so the slope gets better the longer the stream. It is
 *     the same least squares as Algorithm 1's, over a longer queue that is not cleared;
 *   - the history takes the lower envelope of the accepted pairs, not all of them: of each
 *     bin of bin_ns of host time (default 50 ms, cs_set_envelope) only the least-delayed
 *     pair (smallest tau - a t) enters it, when the bin closes. A pair's delay is one-sided
 *     (never below the queue's wake-up minimum) and its upper tail follows the CPU load:
 *     when other processes hold the CPUs for part of a stream, most accepted pairs of that
 *     part are tens of microseconds later, and a least-squares slope through all of them
 *     tilts (on lavapipe next to a pytest worker: up to 2.7e-5 on a 2.5 s stream, 65 us
 *     across it, and up to 22 times its standard error). The least-delayed pair of a bin is
 *     late only when every pair of the bin was, so the envelope's slope follows the clocks,
 *     and its residuals, a few microseconds, give a standard error that means what it says
 *     (the classic remedy for skew estimated from one-way delays: Paxson 1998, Moon et al.
 *     1999). The offset stays the window's mean, as Algorithm 1 has it;
 *   - a new slope is adopted at a refit only when it can be trusted over the horizon it
 *     will serve (from the window's centre to one refit period past the window's end):
 *     its standard error times that horizon must be below half of the history's residual
 *     standard deviation s and below sigma / 2 (the slope may add at most half a pair's
 *     jitter of error); the history must span at least min_span_ns; and the drift must be
 *     physically possible (|a - 1| <= CS_MAX_DRIFT). Otherwise the previous slope stays
 *     (at first a = 1, the nominal clocks: real drifts are tens of ppm, well under a
 *     microsecond over a window). An adopted slope is shrunk towards 1 by the drift's
 *     prior (CS_DRIFT_PRIOR);
 *   - history_ns = 0 (cs_set_history) restores the literal reading, kept as the baseline
 *     the benchmark compares with: the slope is fitted on the window alone whenever the
 *     window spans at least min_span_ns.
 * The standard error of a forgetting-weighted slope is approximated with Kish's effective
 * weight: se^2 = s^2 / C_tt * (sum w^2 / sum w), exact for equal weights, where s^2 is the
 * weighted residual variance of the history. Queue delays are not independent when other
 * processes load the CPUs (a burst delays many consecutive pairs), and then that standard
 * error is several times too small (a slope 600 ppm off passed the test above on a loaded
 * lavapipe run); it is therefore multiplied by sqrt((1 + rho) / (1 - rho)), the AR(1)
 * effective-sample-size correction, with rho the lag-1 autocorrelation of consecutive
 * accepted residuals (clipped to [0, 0.99]; about 0 for independent delays). Sums are
 * kept centred (West's weighted incremental update) on t and on the offset d = tau - t,
 * which varies by microseconds where t varies by seconds, so no precision is lost to
 * cancellation.
 */
#ifndef LATBENCH_CLOCKSYNC_H
#define LATBENCH_CLOCKSYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_WINDOW_MAX 4096
#define CS_HISTORY_NS_DEFAULT 10e9
#define CS_BIN_NS_DEFAULT 50e6
/* Quartz oscillators are specified within +-10..100 ppm: a fitted drift beyond this is a
 * history polluted by stalled pairs (e.g. after a bootstrap with a wide sigma), not drift. */
#define CS_MAX_DRIFT 1e-3
/* ... and tens of ppm is what they do: the drift's prior is N(0, (100 ppm)^2), and an
 * adopted slope is the posterior mean 1 + drift p^2 / (p^2 + se^2). It changes nothing
 * once se << 100 ppm (a long stream: se ~ 1e-8) and halves a slope fitted on a short,
 * loaded history (se ~ 1e-4), whose errors the standard error understates. */
#define CS_DRIFT_PRIOR 1e-4
#define CS_SIGMA_PAIRS 32 /* sigma is renewed from the residuals of this many last pairs (or k) */

/* Weighted least-squares sums of the accepted pairs, centred (see the header comment):
 * x = t - t_ref, y = tau - t (the offset). */
typedef struct {
    double w, w2;          /* sum of weights, sum of squared weights */
    double mx, my;         /* weighted means */
    double cxx, cxy, cyy;  /* weighted centred co-moments */
    double t_first, t_last; /* host times of the oldest and newest pair kept */
    int64_t n;             /* pairs added */
    /* lag-1 autocorrelation of consecutive accepted residuals (against the fit in place),
     * forgetting alike: c1 = sum r_i r_(i-1), c0 = sum r_i^2 */
    double c0, c1, r_prev;
    /* the open bin of the lower envelope: when it began, and its least-delayed pair */
    double bin_start, bin_t, bin_tau, bin_res;
    bool bin_open;
} cs_history;

typedef struct {
    /* parameters */
    int k;                /* refit after this many observed pairs */
    double sigma_floor_ns;
    double min_span_ns;   /* least span of host time behind a fitted slope */
    double history_ns;    /* forgetting time constant of the slope history; 0: window slope */
    double bin_ns;        /* the history takes the least-delayed pair per bin of this width; 0: all */
    /* state */
    double a, b;          /* tau = a t + b */
    double sigma;
    double a_se;          /* standard error of the adopted slope (INFINITY: the nominal 1) */
    bool fitted;
    int n;                /* pairs observed since the last refit */
    int w;                /* pairs in the window */
    double wt[CS_WINDOW_MAX], wtau[CS_WINDOW_MAX];
    int nres, res_head;   /* ring of the residuals of the last observed pairs (sigma) */
    double res[CS_WINDOW_MAX];
    double t_ref;         /* origin subtracted from host times (keeps the sums exact) */
    double t_refit;       /* host time of the last pair observed before the last refit */
    cs_history h;
    /* counters */
    int64_t observed, accepted, rejected, refits, slope_updates;
} clocksync;

void cs_init(clocksync *cs, int k, double sigma_floor_ns, double min_span_ns);
/* Sets the slope history's time constant (ns of host time) before the first pair;
 * 0 fits the slope on each window alone (the literal Algorithm 1, a baseline). */
void cs_set_history(clocksync *cs, double history_ns);
/* Sets the width (ns of host time) of the bins whose least-delayed accepted pair enters
 * the slope history (the lower envelope); 0 lets every accepted pair in. */
void cs_set_envelope(clocksync *cs, double bin_ns);
/* Eq. 2 on n >= 1 injected pairs; returns sigma. */
double cs_bootstrap(clocksync *cs, const int64_t *t, const int64_t *tau, int n);
/* Algorithm 1 SYNC for one pair; returns true if it was accepted (within sigma). */
bool cs_observe(clocksync *cs, int64_t t, int64_t tau);
/* A GPU timestamp on the host clock under the current fit. */
int64_t cs_to_host(const clocksync *cs, int64_t tau);
/* sizeof(clocksync), for callers that allocate it through an FFI (pipelines/gpu/__init__.py). */
size_t cs_state_size(void);
/* The cost of the sync itself, timed in C (benchmarks/bench_gpu.py): feeds the n pairs
 * to cs_observe one by one, writes each call's CLOCK_MONOTONIC duration to ns_out and
 * whether it refitted to refit_out, and returns the median duration of an empty timed
 * interval (the timer's own cost, to subtract). */
int64_t cs_time_observe(clocksync *cs, const int64_t *t, const int64_t *tau, int n, int64_t *ns_out,
                        uint8_t *refit_out);

#endif
