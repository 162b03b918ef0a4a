/* nnPerf's GPU/CPU clock synchronization; see clocksync.h for the algorithm and choices. */
#include "clocksync.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cs_init(clocksync *cs, int k, double sigma_floor_ns, double min_span_ns) {
    memset(cs, 0, sizeof *cs);
    cs->k = k > 0 ? k : 1;
    cs->sigma_floor_ns = sigma_floor_ns > 0 ? sigma_floor_ns : 1.0;
    cs->min_span_ns = min_span_ns;
    cs->history_ns = CS_HISTORY_NS_DEFAULT;
    cs->bin_ns = CS_BIN_NS_DEFAULT;
    cs->a = 1.0;
    cs->a_se = INFINITY;
    cs->sigma = INFINITY; /* nothing known yet: accept the first pairs */
}

void cs_set_history(clocksync *cs, double history_ns) { cs->history_ns = history_ns > 0 ? history_ns : 0.0; }

void cs_set_envelope(clocksync *cs, double bin_ns) { cs->bin_ns = bin_ns > 0 ? bin_ns : 0.0; }

/* ------------------------------------------------------------------ slope history */
/* One accepted pair into the forgetting least-squares sums (West's weighted incremental
 * update: the old weights decay by lambda, the new pair has weight 1). */
static void history_add(clocksync *cs, double t, double tau, double res) {
    cs_history *h = &cs->h;
    double x = t - cs->t_ref, y = tau - t;
    if (h->n == 0) {
        h->t_first = t;
    } else {
        double lambda = exp(-(t - h->t_last) / cs->history_ns);
        h->w *= lambda;
        h->w2 *= lambda * lambda;
        h->cxx *= lambda;
        h->cxy *= lambda;
        h->cyy *= lambda;
        h->c0 *= lambda;
        h->c1 *= lambda;
        h->c1 += res * h->r_prev;
    }
    h->c0 += res * res;
    h->r_prev = res;
    h->w += 1.0;
    h->w2 += 1.0;
    double dx = x - h->mx, dy = y - h->my;
    h->mx += dx / h->w;
    h->my += dy / h->w;
    h->cxx += dx * (x - h->mx);
    h->cxy += dx * (y - h->my);
    h->cyy += dy * (y - h->my);
    h->t_last = t;
    h->n++;
}

/* An accepted pair for the slope history: with bins, only the least-delayed pair of each
 * bin enters it, when the bin closes (the lower envelope, see the header). The pair held
 * and the new one are compared as tau - a t under the current slope, both alike. */
static void history_offer(clocksync *cs, double t, double tau, double res) {
    cs_history *h = &cs->h;
    if (cs->bin_ns <= 0) {
        history_add(cs, t, tau, res);
        return;
    }
    if (h->bin_open && t - h->bin_start >= cs->bin_ns) {
        history_add(cs, h->bin_t, h->bin_tau, h->bin_res);
        h->bin_open = false;
    }
    if (!h->bin_open || tau - cs->a * t < h->bin_tau - cs->a * h->bin_t) {
        if (!h->bin_open) h->bin_start = t;
        h->bin_open = true;
        h->bin_t = t;
        h->bin_tau = tau;
        h->bin_res = res;
    }
}

/* The history's slope and its standard error (Kish's effective weight; see the header).
 * Returns false while it cannot give one: fewer than three pairs or no spread in time. */
static bool history_slope(const clocksync *cs, double *a, double *se, double *s) {
    const cs_history *h = &cs->h;
    double dof = h->w - 2.0 * h->w2 / h->w; /* n - 2 for equal weights */
    if (h->n < 3 || h->cxx <= 0 || dof <= 0) return false;
    double drift = h->cxy / h->cxx;
    double rss = fmax(h->cyy - drift * h->cxy, 0.0);
    *a = 1.0 + drift;
    *s = sqrt(rss / dof);
    double rho = h->c0 > 0 ? fmin(fmax(h->c1 / h->c0, 0.0), 0.99) : 0.0;
    *se = *s * sqrt(h->w2 / h->w / h->cxx * (1.0 + rho) / (1.0 - rho));
    return true;
}

/* ------------------------------------------------------------------ Eq. 2 */
double cs_bootstrap(clocksync *cs, const int64_t *t, const int64_t *tau, int n) {
    if (n <= 0) return cs->sigma;
    cs->t_ref = (double)t[0];
    double m = 0;
    for (int i = 0; i < n; i++) m += (double)(tau[i] - t[i]);
    m /= n;
    double v = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)(tau[i] - t[i]) - m;
        v += d * d;
    }
    cs->sigma = fmax(2.0 * sqrt(v / n), cs->sigma_floor_ns);
    cs->a = 1.0;
    cs->b = m;
    cs->fitted = true;
    /* the injected pairs are pairs like any other: they start the slope history */
    if (cs->history_ns > 0)
        for (int i = 0; i < n; i++) history_offer(cs, (double)t[i], (double)tau[i], (double)(tau[i] - t[i]) - m);
    cs->t_refit = (double)t[n - 1];
    return cs->sigma;
}

/* ------------------------------------------------------------------ Algorithm 1 */
static double predict(const clocksync *cs, double t) { return cs->a * t + cs->b; }

static int cmp_dbl(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The robust standard deviation of the residuals about the fit itself (about zero, not
 * about their own median) from their lower quartile of absolute values: for normal
 * residuals |r| has its 25th percentile at 0.3186 sigma. Measured about the fit, a fit
 * gone stale (residuals 30 +- 5 us) widens sigma until pairs are accepted again and the
 * next refit re-anchors it; a spread about the residuals' median (MAD) would stay at 5 us
 * and lock every later pair out. The lower quartile, not the median, because under CPU
 * load most pairs can be stalls (lavapipe: 0.5-5 ms for 7 of the first 9 pairs of a
 * run next to a busy loop): it stands until 75% of the pairs are stalls (v is reordered). */
static double robust_sd(double *v, int n) {
    for (int i = 0; i < n; i++) v[i] = fabs(v[i]);
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    double pos = 0.25 * (n - 1), frac = pos - floor(pos);
    int i = (int)pos;
    double q = i + 1 < n ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
    return q / 0.3186;
}

/* The two-sigma rule on the residuals of the last observed pairs (the ring below), once
 * it holds k of them (fewer would let a burst of stalls decide). Sigma may at most double
 * per renewal (a slew limit): a stale fit still widens it within a few periods, but a
 * burst of stalls (the warm-up runs' pairs, a loaded CPU) cannot open it to milliseconds
 * at once and let them move the offset. */
static void renew_sigma(clocksync *cs) {
    if (cs->nres < cs->k || cs->nres < 3) return;
    double v[CS_WINDOW_MAX];
    memcpy(v, cs->res, sizeof(double) * (size_t)cs->nres);
    double sigma = fmax(2.0 * robust_sd(v, cs->nres), cs->sigma_floor_ns);
    cs->sigma = isfinite(cs->sigma) ? fmin(sigma, 2.0 * cs->sigma) : sigma;
}

/* The residual ring: the last max(k, CS_SIGMA_PAIRS) observed pairs. */
static void push_residual(clocksync *cs, double r) {
    int cap = cs->k > CS_SIGMA_PAIRS ? cs->k : CS_SIGMA_PAIRS;
    if (cap > CS_WINDOW_MAX) cap = CS_WINDOW_MAX;
    if (cs->nres < cap) {
        cs->res[cs->nres++] = r;
    } else {
        cs->res[cs->res_head] = r;
        cs->res_head = (cs->res_head + 1) % cap;
    }
}

/* The slope for this refit: the literal window slope when there is no history
 * (history_ns == 0), else the history's slope if it is a possible drift and its error
 * over the horizon stays within half of both the pair jitter and sigma (clocksync.h);
 * otherwise the current one stays. */
static void refit_slope(clocksync *cs, double stt, double stu, double tmin, double tmax, double horizon) {
    if (cs->history_ns <= 0) {
        if (cs->w >= 2 && stt > 0 && tmax - tmin >= cs->min_span_ns) {
            cs->a = stu / stt;
            cs->slope_updates++;
        }
        return;
    }
    double a, se, s;
    if (cs->h.t_last - cs->h.t_first < cs->min_span_ns || !history_slope(cs, &a, &se, &s)) return;
    if (fabs(a - 1.0) <= CS_MAX_DRIFT && se * horizon <= 0.5 * fmin(s, cs->sigma)) {
        /* the posterior mean under the oscillators' tolerance as a prior on the drift */
        double p2 = CS_DRIFT_PRIOR * CS_DRIFT_PRIOR, shrink = p2 / (p2 + se * se);
        cs->a = 1.0 + (a - 1.0) * shrink;
        cs->a_se = se * sqrt(shrink);
        cs->slope_updates++;
    }
}

/* Algorithm 1, line 9: least squares on the window (host times relative to t_ref for
 * exact sums); the slope as refit_slope decides, the offset always from the window. */
static void refit(clocksync *cs) {
    int w = cs->w;
    if (w <= 0) return;
    double mt = 0, mu = 0;
    for (int i = 0; i < w; i++) {
        mt += cs->wt[i] - cs->t_ref;
        mu += cs->wtau[i] - cs->t_ref;
    }
    mt /= w;
    mu /= w;
    double stt = 0, stu = 0, tmin = cs->wt[0], tmax = cs->wt[0];
    for (int i = 0; i < w; i++) {
        double dt = cs->wt[i] - cs->t_ref - mt, du = cs->wtau[i] - cs->t_ref - mu;
        stt += dt * dt;
        stu += dt * du;
        if (cs->wt[i] < tmin) tmin = cs->wt[i];
        if (cs->wt[i] > tmax) tmax = cs->wt[i];
    }
    /* the fit serves from the window's centre until about one period after its end */
    double t_now = cs->wt[w - 1], horizon = (t_now - (mt + cs->t_ref)) + (t_now - cs->t_refit);
    if (!cs->fitted) horizon = INFINITY; /* no period seen yet: no slope */
    refit_slope(cs, stt, stu, tmin, tmax, horizon);
    double a = cs->a;
    /* tau - t_ref = a (t - t_ref) + c  =>  b = c + t_ref (1 - a) */
    double c = mu - a * mt;
    cs->b = c + cs->t_ref * (1.0 - a);
    /* sigma from the residuals of the last observed pairs (robust spread about the fit,
     * see the header) */
    renew_sigma(cs);
    cs->t_refit = t_now;
    cs->fitted = true;
    cs->refits++;
}

bool cs_observe(clocksync *cs, int64_t t, int64_t tau) {
    cs->observed++;
    cs->n++; /* sliding window count (Algorithm 1, line 4) */
    if (!cs->fitted && cs->w == 0) cs->t_ref = cs->t_refit = (double)t;
    double res = cs->fitted ? (double)tau - predict(cs, (double)t) : 0.0;
    if (cs->fitted) push_residual(cs, res);
    if (fabs(res) > cs->sigma) { /* lines 14-16: outlier, reuse the previous fit */
        cs->rejected++;
        /* the k-th observed pair ends the period even when it is itself an outlier: the
         * accepted pairs of the period are fitted now (deferring the refit by another k
         * pairs would let a drifting offset run out of sigma), and sigma is renewed, or a
         * shifted delay distribution would be rejected for ever */
        if (cs->n > cs->k) {
            cs->n = 1;
            if (cs->w > 0) {
                refit(cs);
                cs->w = 0;
            } else {
                renew_sigma(cs);
            }
        }
        return false;
    }
    cs->accepted++;
    if (cs->history_ns > 0) history_offer(cs, (double)t, (double)tau, res);
    if (cs->w == CS_WINDOW_MAX) { /* the window is a queue: drop its oldest pair */
        memmove(cs->wt, cs->wt + 1, sizeof(double) * (CS_WINDOW_MAX - 1));
        memmove(cs->wtau, cs->wtau + 1, sizeof(double) * (CS_WINDOW_MAX - 1));
        cs->w--;
    }
    cs->wt[cs->w] = (double)t;
    cs->wtau[cs->w] = (double)tau;
    cs->w++;
    if (cs->n > cs->k || !cs->fitted) { /* lines 7-11: refit on the window, then clear it */
        cs->n = 1;
        refit(cs);
        cs->w = 0;
    }
    return true;
}

int64_t cs_to_host(const clocksync *cs, int64_t tau) {
    return (int64_t)llround(((double)tau - cs->b) / cs->a);
}

size_t cs_state_size(void) { return sizeof(clocksync); }

/* ------------------------------------------------------------------ self-timing */
static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cs_time_observe(clocksync *cs, const int64_t *t, const int64_t *tau, int n, int64_t *ns_out,
                        uint8_t *refit_out) {
    for (int i = 0; i < n; i++) {
        int64_t refits = cs->refits;
        int64_t t0 = mono_ns();
        cs_observe(cs, t[i], tau[i]);
        int64_t t1 = mono_ns();
        ns_out[i] = t1 - t0;
        refit_out[i] = cs->refits != refits;
    }
    /* the timer's own cost: the same two reads around nothing */
    enum { EMPTY = 1001 };
    double empty[EMPTY];
    for (int i = 0; i < EMPTY; i++) {
        int64_t t0 = mono_ns();
        int64_t t1 = mono_ns();
        empty[i] = (double)(t1 - t0);
    }
    return (int64_t)median(empty, EMPTY);
}
