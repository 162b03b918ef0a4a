/* latbench-run: on-device latency measurement of a .tflite model through the LiteRT C API.
 *
 * Order of events (each step matters for what the numbers mean); main() calls the phase
 * functions named in brackets, in this order:
 *   1. arguments, model file check [parse_args, check_model_file];
 *   2. the process is pinned to the requested CPU set (before any runtime thread exists,
 *      so LiteRT's thread pool and the writer thread inherit the set) [choose_cpus,
 *      pin_to_cpus];
 *   3. the asynchronous writer starts (SCHED_IDLE, inside the set) [start_writer];
 *   4. LiteRT environment, model, compiled model(s), tensor buffers [open_runtime,
 *      load_model, compile_models];
 *   5. warm-up runs; then every thread's affinity is read back from the OS [warm_up,
 *      write_meta];
 *   6. timed runs [timed_runs]: each one is exactly  t0 = clock(); LiteRtRunCompiledModel();
 *      t1 = clock() (timed_run). Profiler start/stop, event retrieval and record hand-off
 *      happen outside [t0, t1];
 *   7. optional overhead measurement (alternating plain / armed / profiled runs; in e2e
 *      mode, runs timed one by one against runs timed as one block) [overhead_profiled,
 *      overhead_e2e];
 *   8. end record, writer drained, files closed [write_end, release_runtime].
 * See print_help() for the CLI, the record schema and the exit codes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "litert_api.h"
#include "memsample.h"
#include "platform.h"
#include "sbuf.h"
#include "writer.h"

#define TOOL_VERSION "0.1.0"

enum exit_code {
    EXIT_OK = 0,
    EXIT_USAGE = 2,
    EXIT_MODEL_MISSING = 3,
    EXIT_MODEL_INVALID = 4,
    EXIT_CPUS = 5,
    EXIT_RUNTIME = 6,
    EXIT_OUTPUT = 7,
};

enum mode { MODE_E2E, MODE_OP, MODE_KERNEL };
static const char *mode_names[] = {"e2e", "op", "kernel"};

typedef struct {
    const char *model, *records, *trace, *cpus_arg, *precision, *accelerator, *runtime_version, *outputs;
    int mode, threads, warmup, runs, overhead_pairs;
    bool verbose, keep_memory_sampling;
} args_t;

/* ------------------------------------------------------------------------------------ */
/* errors: one line on the original stderr; LiteRT's own log goes to a capture file     */

static int g_err_fd = 2;
static FILE *g_capture = NULL;

static void lib_log_tail(char *out, size_t len) {
    out[0] = 0;
    if (!g_capture) return;
    fflush(stderr);
    int fd = fileno(g_capture);
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0) return;
    off_t from = size > 65536 ? size - 65536 : 0;
    size_t n = (size_t)(size - from);
    char *buf = malloc(n + 1);
    if (!buf) return;
    ssize_t got = pread(fd, buf, n, from);
    if (got <= 0) {
        free(buf);
        return;
    }
    buf[got] = 0;
    /* the last line that looks like an error, else the last non-empty line */
    char *best = NULL, *last = NULL;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        while (*line == ' ' || *line == '\r') line++;
        if (!*line) continue;
        last = line;
        if (strstr(line, "ERROR") || strstr(line, "rror")) best = line;
    }
    if (!best) best = last;
    if (best) {
        snprintf(out, len, "%s", best);
        for (char *p = out; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
    }
    free(buf);
}

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dprintf(g_err_fd, "latbench-run: error: %s\n", msg);
    _exit(code);
}

/* die() for a failed LiteRT call: quotes the runtime's last log line if there is one. */
static void die_lr(int code, LrStatus st, const char *what) __attribute__((noreturn));
static void die_lr(int code, LrStatus st, const char *what) {
    char tail[300];
    lib_log_tail(tail, sizeof tail);
    if (tail[0]) die(code, "%s (LiteRT status %d; runtime said: %s)", what, st, tail);
    die(code, "%s (LiteRT status %d)", what, st);
}

static void capture_library_stderr(void) {
    g_err_fd = dup(2);
    if (g_err_fd < 0) {
        g_err_fd = 2;
        return;
    }
    fcntl(g_err_fd, F_SETFD, FD_CLOEXEC);
    g_capture = tmpfile();
    if (!g_capture) return;
    fflush(stderr);
    dup2(fileno(g_capture), 2);
}

/* ------------------------------------------------------------------------------------ */
/* arguments                                                                            */

static void print_help(void) {
    printf(
        "latbench-run " TOOL_VERSION ": times a .tflite model through the LiteRT C API (libLiteRt.so)\n"
        "\n"
        "usage: latbench-run --model M.tflite --records OUT.jsonl [--trace OUT.trace.json]\n"
        "                    [--cpus 0,1] [--threads 2] [--mode e2e|op|kernel] [--warmup 5]\n"
        "                    [--runs 50] [--overhead-pairs N] [--precision fp32|fp16|int8]\n"
        "                    [--accelerator cpu|gpu] [--runtime-version V]\n"
        "                    [--keep-memory-sampling] [--verbose]\n"
        "\n"
        "  --model PATH          the .tflite file (required)\n"
        "  --records PATH        JSON-lines records; \"-\" writes them to stdout (required)\n"
        "  --trace PATH          Chrome-trace / Perfetto JSON timeline: tracks runs, ops,\n"
        "                        kernels, runtime (optional)\n"
        "  --cpus LIST           CPUs to pin the whole process to, before the runtime and its\n"
        "                        thread pool exist (e.g. 0,1 or 0-3; default: all CPUs the\n"
        "                        process may use now)\n"
        "  --threads N           threads of the CPU backend (XNNPACK or builtin kernels), default 1\n"
        "  --mode MODE           e2e: XNNPACK, model compiled without profiling (default)\n"
        "                        op: builtin TFLite kernels (XNNPACK bypassed, kernel_mode =\n"
        "                            builtin), one event per executed TFLite node\n"
        "                        kernel: XNNPACK, one event per executed XNNPACK operator (the\n"
        "                            fused kernel that ran), plus any TFLite node left to\n"
        "                            builtin kernels (as op and as kernel)\n"
        "  --warmup N            warm-up runs before the timed runs (default 5)\n"
        "  --runs N              timed runs (default 50)\n"
        "  --overhead-pairs N    after the timed runs, N rounds of three alternating runs, in\n"
        "                        rotating order: plain (a second compiled model without the\n"
        "                        profiling option), armed (profiling compiled in, profiler\n"
        "                        stopped) and profiled (profiler recording); the overhead record\n"
        "                        gives median ratios. In e2e mode each round alternates 5 runs\n"
        "                        timed one by one (as the timed runs) with 5 runs timed as one\n"
        "                        block (no per-run clock reads or records): the instrument's own\n"
        "                        cost. Default 0: skipped\n"
        "  --precision P         fp32, fp16 or int8: the model's declared precision, checked\n"
        "                        against its tensor types (default: recorded as detected)\n"
        "  --accelerator A       cpu (default) or gpu (the wheel's WebGPU accelerator; e2e only)\n"
        "  --dump-outputs PATH   write the output tensors of the last timed run to PATH (raw\n"
        "                        bytes, outputs one after another; the input is the same\n"
        "                        pseudo-random tensor on every accelerator, so CPU and GPU\n"
        "                        results can be compared)\n"
        "  --runtime-version V   version string of the runtime package for the meta record\n"
        "                        (the C API exposes none), e.g. 2.3.0\n"
        "  --keep-memory-sampling\n"
        "                        leave LiteRT's profiler its memory sampling: getrusage() +\n"
        "                        a /proc/self/status read at both ends of each non-operator\n"
        "                        event, six per run, all inside the run call (default: off\n"
        "                        during the runs; latbench-run records no memory fields)\n"
        "  --verbose             let LiteRT's own log lines through to stderr (default: they\n"
        "                        are captured, and the last one is quoted in error messages)\n"
        "\n"
        "Records (one JSON object per line, integer nanoseconds, CLOCK_MONOTONIC, the time\n"
        "base of LiteRT's profiler):\n"
        "  meta     first line: tool, runtime, library path, model path/bytes, precision,\n"
        "           cpus, threads, mode, cpu_kernel_mode, warmup, runs, hostname, clock,\n"
        "           thread_affinity (every thread: tid, name, role main|writer|runtime,\n"
        "           CPU set read back from the OS after warm-up, cpu_time_ns, wait_time_ns\n"
        "           runnable but not running), affinity_ok, ...\n"
        "  run      phase (warmup|timed|overhead), run, start_ns, end_ns, duration_ns,\n"
        "           profiled, condition (overhead phase)\n"
        "  op       run, order, node, subgraph, name, start_ns, duration_ns (timed runs of\n"
        "           op mode; in kernel mode the nodes not delegated to XNNPACK)\n"
        "  kernel   run, order, name, duration_ns, source: xnnpack (partition = its ordinal\n"
        "           in the run, index_in_partition; no start time) or builtin (node,\n"
        "           start_ns)\n"
        "  runtime  run, order, name, start_ns, duration_ns: LiteRT's own spans (Invoke, ...)\n"
        "  overhead mode, pairs, median_unprofiled_ns (plain), median_armed_ns,\n"
        "           median_profiled_ns, ratio (profiled/plain medians), ratio_armed\n"
        "           (armed/plain), median_pair_ratio (median over rounds of profiled/plain),\n"
        "           median_recording_ratio (profiled/armed: same compiled model); e2e mode:\n"
        "           median_unprofiled_ns = block time / 5, median_profiled_ns = instrumented\n"
        "           run, ratio = their quotient\n"
        "  end      last line: counts, final thread_affinity, affinity_ok, wall time,\n"
        "           compute_threads_observed (main + the runtime's pool threads: below\n"
        "           --threads means the backend ran narrower than asked),\n"
        "           runtime_threads_active (pool threads that ran at all)\n"
        "Profiler durations have 1 us resolution (converted to ns).\n"
        "\n"
        "Exit codes: 0 ok; 2 bad arguments (unknown mode, precision or accelerator, bad\n"
        "number, declared precision does not match the model); 3 model file missing or\n"
        "unreadable; 4 model file is not a valid .tflite model; 5 impossible CPU set (a CPU\n"
        "that does not exist or is not allowed) or a thread found outside the set; 6 LiteRT\n"
        "failed to compile or run the model; 7 an output file could not be written.\n"
        "A crash inside the runtime while it loads the model (e.g. a truncated file) exits\n"
        "with 4, one while it runs with 6. Errors are one line on stderr.\n");
}

static int parse_int(const char *opt, const char *v, int lo, int hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die(EXIT_USAGE, "%s: expected an integer in [%d, %d], got '%s'", opt, lo, hi, v);
    return (int)x;
}

static void parse_args(int argc, char **argv, args_t *a) {
    memset(a, 0, sizeof *a);
    a->mode = MODE_E2E;
    a->threads = 1;
    a->warmup = 5;
    a->runs = 50;
    a->accelerator = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            print_help();
            exit(0);
        }
        if (!strcmp(o, "--verbose")) {
            a->verbose = true;
            continue;
        }
        if (!strcmp(o, "--keep-memory-sampling")) {
            a->keep_memory_sampling = true;
            continue;
        }
        if (strncmp(o, "--", 2) != 0) die(EXIT_USAGE, "unexpected argument '%s' (see --help)", o);
        const char *v = NULL;
        const char *eq = strchr(o, '=');
        char optbuf[64];
        if (eq) {
            snprintf(optbuf, sizeof optbuf, "%.*s", (int)(eq - o), o);
            o = optbuf;
            v = eq + 1;
        } else {
            if (i + 1 >= argc) die(EXIT_USAGE, "%s needs a value (see --help)", o);
            v = argv[++i];
        }
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--records")) a->records = v;
        else if (!strcmp(o, "--trace")) a->trace = v;
        else if (!strcmp(o, "--cpus")) a->cpus_arg = v;
        else if (!strcmp(o, "--threads")) a->threads = parse_int(o, v, 1, 256);
        else if (!strcmp(o, "--warmup")) a->warmup = parse_int(o, v, 0, 1000000);
        else if (!strcmp(o, "--runs")) a->runs = parse_int(o, v, 1, 10000000);
        else if (!strcmp(o, "--overhead-pairs")) a->overhead_pairs = parse_int(o, v, 0, 1000000);
        else if (!strcmp(o, "--precision")) a->precision = v;
        else if (!strcmp(o, "--accelerator")) a->accelerator = v;
        else if (!strcmp(o, "--runtime-version")) a->runtime_version = v;
        else if (!strcmp(o, "--dump-outputs")) a->outputs = v;
        else if (!strcmp(o, "--mode")) {
            int m = -1;
            for (int k = 0; k < 3; k++)
                if (!strcmp(v, mode_names[k])) m = k;
            if (m < 0) die(EXIT_USAGE, "--mode: unknown mode '%s' (known: e2e, op, kernel)", v);
            a->mode = m;
        } else die(EXIT_USAGE, "unknown option %s (see --help)", o);
    }
    if (!a->model) die(EXIT_USAGE, "--model is required (see --help)");
    if (!a->records) die(EXIT_USAGE, "--records is required (see --help)");
    if (a->precision && strcmp(a->precision, "fp32") && strcmp(a->precision, "fp16") &&
        strcmp(a->precision, "int8"))
        die(EXIT_USAGE, "--precision: unknown precision '%s' (known: fp32, fp16, int8)", a->precision);
    if (strcmp(a->accelerator, "cpu") && strcmp(a->accelerator, "gpu"))
        die(EXIT_USAGE, "--accelerator: unknown accelerator '%s' (known: cpu, gpu)", a->accelerator);
    if (!strcmp(a->accelerator, "gpu") && a->mode == MODE_OP)
        die(EXIT_USAGE, "--accelerator gpu: no op-level events on the GPU (LiteRT's profiler is not "
                        "implemented for it); use --mode e2e or --mode kernel (Vulkan timestamp layer)");
    if (!strcmp(a->accelerator, "gpu") && a->precision && !strcmp(a->precision, "int8"))
        die(EXIT_USAGE, "--accelerator gpu: --precision int8 is CPU-only (the GPU runs float models at fp16 or fp32)");
}

/* ------------------------------------------------------------------------------------ */
/* interned event names (the writer reads them until it closes; never freed)            */

typedef struct {
    char **slot;
    size_t cap, n;
} intern_t;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

static const char *intern(intern_t *t, const char *s) {
    if (!s) s = "";
    if (t->n * 2 >= t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        char **slot = calloc(cap, sizeof *slot);
        if (!slot) abort();
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i]) {
                size_t j = hash_str(t->slot[i]) & (cap - 1);
                while (slot[j]) j = (j + 1) & (cap - 1);
                slot[j] = t->slot[i];
            }
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
    }
    size_t j = hash_str(s) & (t->cap - 1);
    while (t->slot[j]) {
        if (!strcmp(t->slot[j], s)) return t->slot[j];
        j = (j + 1) & (t->cap - 1);
    }
    t->slot[j] = strdup(s);
    t->n++;
    return t->slot[j];
}

/* ------------------------------------------------------------------------------------ */
/* LiteRT set-up                                                                        */

typedef struct {
    LrCompiledModel cm;
    LrTensorBuffer *in, *out;
    size_t n_in, n_out;
    LrProfiler prof; /* NULL unless compiled with profiling */
    bool read_back;  /* GPU: a run ends when its outputs are readable on the host */
} compiled_t;

static void free_payload(void *p) { free(p); }

static gpu_state *g_gpu; /* --accelerator gpu (gpu.c) */

static void add_opaque(LrOptions opts, const char *id, const char *toml) {
    char *payload = strdup(toml);
    LrOpaqueOptions oo = NULL;
    LrStatus st = LiteRtCreateOpaqueOptions(id, payload, free_payload, &oo);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot create LiteRT options");
    st = LiteRtAddOpaqueOptions(opts, oo);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot add LiteRT options");
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static uint32_t rng_next(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

static LrTensorBuffer make_buffer(LrEnvironment env, LrCompiledModel cm, LrSignature sig,
                                  size_t i, bool input, const char *model_path) {
    LrTensor t;
    LrRankedTensorType type;
    LrTensorBufferRequirements req;
    LrTensorBuffer buf;
    LrStatus st = input ? LiteRtGetSignatureInputTensorByIndex(sig, i, &t)
                        : LiteRtGetSignatureOutputTensorByIndex(sig, i, &t);
    if (st == LR_OK) st = LiteRtGetRankedTensorType(t, &type);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot read the model's signature tensors");
    st = input ? LiteRtGetCompiledModelInputBufferRequirements(cm, 0, i, &req)
               : LiteRtGetCompiledModelOutputBufferRequirements(cm, 0, i, &req);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot get tensor buffer requirements");
    st = LiteRtCreateManagedTensorBufferFromRequirements(env, &type, req, &buf);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot create a tensor buffer");
    if (input) {
        /* deterministic pseudo-random input: floats in [-1, 1), other types random bytes */
        void *p;
        size_t size = 0;
        st = LiteRtGetTensorBufferSize(buf, &size);
        if (st == LR_OK) st = LiteRtLockTensorBuffer(buf, &p, LR_LOCK_WRITE);
        if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot fill an input buffer");
        if (type.element_type == LR_ELEM_FLOAT32) {
            float *f = p;
            for (size_t k = 0; k < size / sizeof(float); k++)
                f[k] = (float)((int32_t)(rng_next() & 0xFFFF) - 32768) / 32768.0f;
        } else if (type.element_type == LR_ELEM_FLOAT16 || type.element_type == LR_ELEM_BOOL) {
            memset(p, 0, size);
        } else {
            unsigned char *c = p;
            for (size_t k = 0; k < size; k++) c[k] = (unsigned char)rng_next();
        }
        LiteRtUnlockTensorBuffer(buf);
    }
    (void)model_path;
    return buf;
}

static void compile_model(compiled_t *c, LrEnvironment env, LrModel model, LrSignature sig,
                          const args_t *a, bool profiling, const char *model_path) {
    memset(c, 0, sizeof *c);
    LrOptions opts;
    LrStatus st = LiteRtCreateOptions(&opts);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot create LiteRT options");
    bool gpu = !strcmp(a->accelerator, "gpu");
    st = LiteRtSetOptionsHardwareAccelerators(opts, gpu ? LR_HW_GPU : LR_HW_CPU);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot select the accelerator");
    char toml[128];
    snprintf(toml, sizeof toml, "num_threads = %d\n%s", a->threads,
             a->mode == MODE_OP ? "kernel_mode = \"builtin\"\n" : "");
    add_opaque(opts, "xnnpack", toml);
    /* The XNNPACK accelerator reads "xnnpack", but the compiled model's own TFLite
     * interpreter (the builtin kernels of op mode, and any node XNNPACK leaves) takes its
     * thread count from the CPU options under "cpu_delegate" and runs single-threaded
     * without them (LiteRT 2.x, litert/runtime/compiled_model.cc). Same payload for both. */
    if (!gpu) add_opaque(opts, "cpu_delegate", toml);
    if (profiling) add_opaque(opts, "runtime_options_string", "enable_profiling = true\n");
    if (gpu) add_opaque(opts, "gpu_options", gpu_options_toml(g_gpu));
    st = LiteRtCreateCompiledModel(env, model, opts, &c->cm);
    LiteRtDestroyOptions(opts);
    if (st != LR_OK) {
        char what[1200];
        snprintf(what, sizeof what, "LiteRT cannot compile %s", model_path);
        die_lr(EXIT_RUNTIME, st, what);
    }
    LrParamIndex n_in = 0, n_out = 0;
    LiteRtGetNumSignatureInputs(sig, &n_in);
    LiteRtGetNumSignatureOutputs(sig, &n_out);
    c->n_in = n_in;
    c->n_out = n_out;
    c->in = calloc(n_in ? n_in : 1, sizeof *c->in);
    c->out = calloc(n_out ? n_out : 1, sizeof *c->out);
    for (size_t i = 0; i < n_in; i++) c->in[i] = make_buffer(env, c->cm, sig, i, true, model_path);
    for (size_t i = 0; i < n_out; i++)
        c->out[i] = make_buffer(env, c->cm, sig, i, false, model_path);
    c->read_back = gpu;
    if (profiling) {
        st = LiteRtCompiledModelGetProfiler(c->cm, &c->prof);
        if (st != LR_OK || !c->prof) die_lr(EXIT_RUNTIME, st, "the compiled model has no profiler");
    }
}

static void destroy_compiled(compiled_t *c) {
    if (!c->cm) return;
    for (size_t i = 0; i < c->n_in; i++) LiteRtDestroyTensorBuffer(c->in[i]);
    for (size_t i = 0; i < c->n_out; i++) LiteRtDestroyTensorBuffer(c->out[i]);
    free(c->in);
    free(c->out);
    LiteRtDestroyCompiledModel(c->cm);
    c->cm = NULL;
}

/* --dump-outputs: the raw bytes of every output tensor, in signature order. */
static void dump_outputs(compiled_t *c, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) die(EXIT_OUTPUT, "cannot write outputs file %s: %s", path, strerror(errno));
    for (size_t i = 0; i < c->n_out; i++) {
        void *p;
        size_t size = 0;
        LrStatus st = LiteRtGetTensorBufferSize(c->out[i], &size);
        if (st == LR_OK) st = LiteRtLockTensorBuffer(c->out[i], &p, LR_LOCK_READ);
        if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot read an output tensor");
        size_t put = fwrite(p, 1, size, f);
        LiteRtUnlockTensorBuffer(c->out[i]);
        if (put != size) die(EXIT_OUTPUT, "cannot write outputs file %s", path);
    }
    if (fclose(f) != 0) die(EXIT_OUTPUT, "cannot write outputs file %s: %s", path, strerror(errno));
}

/* On the GPU the run call returns once the work is submitted; the outputs are locked for
 * reading (which waits for the GPU and copies them back) inside the interval, so a run ends
 * when an application could use its result. */
static LrStatus read_outputs(compiled_t *c) {
    for (size_t i = 0; i < c->n_out; i++) {
        void *p;
        LrStatus st = LiteRtLockTensorBuffer(c->out[i], &p, LR_LOCK_READ);
        if (st != LR_OK) return st;
        LiteRtUnlockTensorBuffer(c->out[i]);
    }
    return LR_OK;
}

/* The timed region: two clock reads around the run call, nothing else (on the GPU, the
 * read-back above as well). */
static inline LrStatus timed_run(compiled_t *c, int64_t *t0, int64_t *t1) {
    *t0 = plat_now_ns();
    LrStatus st = LiteRtRunCompiledModel(c->cm, 0, c->n_in, c->in, c->n_out, c->out);
    if (st == LR_OK && c->read_back) st = read_outputs(c);
    *t1 = plat_now_ns();
    return st;
}

static void check_run(LrStatus st, const char *model_path) {
    if (st != LR_OK) {
        char what[1200];
        snprintf(what, sizeof what, "running %s failed", model_path);
        die_lr(EXIT_RUNTIME, st, what);
    }
}

/* Model facts for the meta record: op count and a precision guess from tensor types. */
typedef struct {
    size_t subgraphs, ops;
    int n_int8, n_f16, n_f32;
    int input_type;
    const char *detected;
} model_facts;

static void inspect_model(LrModel model, LrSignature sig, model_facts *f) {
    memset(f, 0, sizeof *f);
    LiteRtGetNumModelSubgraphs(model, &f->subgraphs);
    LrSubgraph sg;
    if (LiteRtGetSignatureSubgraph(sig, &sg) == LR_OK) {
        LiteRtGetNumSubgraphOps(sg, &f->ops);
        for (size_t i = 0; i < f->ops; i++) {
            LrOp op;
            if (LiteRtGetSubgraphOp(sg, i, &op) != LR_OK) continue;
            for (int io = 0; io < 2; io++) {
                LrParamIndex n = 0;
                if (io == 0) LiteRtGetNumOpInputs(op, &n);
                else LiteRtGetNumOpOutputs(op, &n);
                for (size_t k = 0; k < n; k++) {
                    LrTensor t = NULL;
                    int tid = -1;
                    LrRankedTensorType rt;
                    if ((io == 0 ? LiteRtGetOpInput(op, k, &t) : LiteRtGetOpOutput(op, k, &t)) != LR_OK || !t)
                        continue;
                    if (LiteRtGetTensorTypeId(t, &tid) != LR_OK || tid != LR_RANKED_TENSOR) continue;
                    if (LiteRtGetRankedTensorType(t, &rt) != LR_OK) continue;
                    if (rt.element_type == LR_ELEM_INT8 || rt.element_type == LR_ELEM_UINT8) f->n_int8++;
                    else if (rt.element_type == LR_ELEM_FLOAT16) f->n_f16++;
                    else if (rt.element_type == LR_ELEM_FLOAT32) f->n_f32++;
                }
            }
        }
    }
    LrTensor t;
    LrRankedTensorType rt;
    f->input_type = -1;
    if (LiteRtGetSignatureInputTensorByIndex(sig, 0, &t) == LR_OK &&
        LiteRtGetRankedTensorType(t, &rt) == LR_OK)
        f->input_type = rt.element_type;
    if (f->n_int8 && (f->input_type == LR_ELEM_INT8 || f->input_type == LR_ELEM_UINT8 || f->n_f32 <= f->n_int8 / 4))
        f->detected = "int8";
    else if (f->n_f16) f->detected = "fp16";
    else if (f->n_int8) f->detected = "dynamic_int8";
    else f->detected = "fp32";
}

/* ------------------------------------------------------------------------------------ */
/* profiler events -> records                                                            */

typedef struct {
    LrProfiledEvent *ev;
    int cap;
    int64_t events_total, runs_with_events;
    bool dump; /* LATBENCH_DUMP_EVENTS=1: print the first timed run's raw events (debugging) */
} events_t;

/* Reads the events of the run that just ended and pushes op / kernel / runtime records. */
static void collect_events(compiled_t *c, events_t *E, intern_t *names, writer *w, int run,
                           int64_t run_start_ns, int mode) {
    int n = 0;
    LrStatus st = LiteRtGetNumProfilerEvents(c->prof, &n);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot read profiler events");
    if (n <= 0) return;
    if (n > E->cap) {
        E->cap = n * 2;
        E->ev = realloc(E->ev, (size_t)E->cap * sizeof *E->ev);
        if (!E->ev) abort();
    }
    st = LiteRtGetProfilerEvents(c->prof, E->cap, E->ev);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot read profiler events");
    E->events_total += n;
    E->runs_with_events++;
    if (E->dump && run == 0)
        for (int i = 0; i < n; i++)
            dprintf(g_err_fd, "event %d: type=%d tag=%s start_us=%llu elapsed_us=%llu meta1=%llu meta2=%llu src=%d\n", i,
                    E->ev[i].event_type, E->ev[i].tag, (unsigned long long)E->ev[i].start_timestamp_us,
                    (unsigned long long)E->ev[i].elapsed_time_us, (unsigned long long)E->ev[i].event_metadata1,
                    (unsigned long long)E->ev[i].event_metadata2, E->ev[i].event_source);
    /* Observed with the wheel's XNNPACK delegate: a delegated partition emits no operator
     * event of its own, only one DELEGATE_PROFILED event per XNNPACK operator, added when
     * the partition has finished (no start time; event_metadata1 = operator index inside
     * the partition, restarting at 0 in the next partition). Nodes left to builtin kernels
     * (e.g. int8 AVERAGE_POOL_2D) emit OPERATOR_INVOKE events between partitions. Buffer
     * order is execution order, so a partition starts where the previous node ended (or,
     * for the first one, where "Invoke" started): that is its anchor for the timeline. */
    int n_op = 0, n_kernel = 0, n_rt = 0, partition = -1;
    int64_t anchor = run_start_ns, part_anchor = run_start_ns;
    bool prev_kernel = false;
    for (int i = 0; i < n; i++) {
        const LrProfiledEvent *e = &E->ev[i];
        if (e->event_type >= 32) continue; /* telemetry events carry no timing */
        /* the type is set below, once the event's kind is known */
        record r = record_make(0, run, e->start_timestamp_us ? (int64_t)e->start_timestamp_us * 1000 : -1,
                               (int64_t)e->elapsed_time_us * 1000);
        r.name = intern(names, e->tag);
        r.node = -1;
        r.subgraph = -1;
        r.sub_index = -1;
        bool is_kernel = e->event_type == LR_EV_DELEGATE_PROFILED_OPERATOR_INVOKE ||
                         e->event_type == LR_EV_DELEGATE_OPERATOR_INVOKE;
        if (e->event_type == LR_EV_OPERATOR_INVOKE) {
            r.type = REC_OP;
            r.node = (int32_t)e->event_metadata1;
            r.subgraph = (int32_t)e->event_metadata2;
            r.order = n_op++;
            writer_push(w, &r);
            if (r.start_ns >= 0) anchor = r.start_ns + r.dur_ns;
            if (mode == MODE_KERNEL) {
                /* a node that ran on builtin kernels is its own kernel */
                r.type = REC_KERNEL;
                r.flags = SRC_BUILTIN;
                r.order = n_kernel++;
                writer_push(w, &r);
            }
        } else if (is_kernel) {
            if (!prev_kernel || e->event_metadata1 == 0) {
                partition++;
                part_anchor = anchor;
            }
            r.type = REC_KERNEL;
            r.flags = SRC_XNNPACK;
            r.subgraph = partition; /* the partition's ordinal within the run */
            r.sub_index = (int32_t)e->event_metadata1;
            r.start_ns = -1;
            r.anchor_ns = part_anchor;
            r.order = n_kernel++;
            writer_push(w, &r);
            anchor += r.dur_ns; /* a partition right after this one starts after it */
        } else {
            r.type = REC_RUNTIME;
            r.order = n_rt++;
            if (r.start_ns >= 0) {
                writer_push(w, &r);
                if (!strcmp(r.name, "Invoke")) anchor = r.start_ns;
            }
        }
        prev_kernel = is_kernel;
    }
}

/* ------------------------------------------------------------------------------------ */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), which it sorts. */
static double median_dbl(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median of nanosecond counts, v left as it is; a double holds them exactly (< 2^53 ns). */
static double median_i64(const int64_t *v, int n) {
    if (n <= 0) return 0;
    double *d = malloc((size_t)n * sizeof *d);
    if (!d) die(EXIT_RUNTIME, "out of memory for the median of %d values", n);
    for (int i = 0; i < n; i++) d[i] = (double)v[i];
    double med = median_dbl(d, n);
    free(d);
    return med;
}

static bool same_set(const plat_thread_affinity *t, const int *cpus, int n) {
    if (t->ncpus != n) return false;
    for (int i = 0; i < n; i++)
        if (t->cpus[i] != cpus[i]) return false;
    return true;
}

/* Appends "thread_affinity":[...],"affinity_ok":bool; returns the first bad thread or NULL. */
static const char *affinity_json(sbuf *b, const int *cpus, int ncpus, long writer_tid,
                                 char *bad, size_t badlen) {
    static plat_thread_affinity th[512];
    int n = plat_thread_affinities(th, 512);
    bool ok = n > 0;
    bad[0] = 0;
    sb_puts(b, "\"thread_affinity\":[");
    for (int i = 0; i < n && i < 512; i++) {
        if (i) sb_puts(b, ",");
        sb_printf(b, "{\"tid\":%ld,\"name\":", th[i].tid);
        sb_json_str(b, th[i].name);
        sb_printf(b, ",\"role\":\"%s\",\"cpus\":[",
                  th[i].tid == plat_process_id() ? "main"
                  : th[i].tid == writer_tid      ? "writer"
                                                 : "runtime");
        for (int k = 0; k < th[i].ncpus && k < 64; k++) sb_printf(b, k ? ",%d" : "%d", th[i].cpus[k]);
        sb_printf(b, "],\"cpu_time_ns\":%lld,\"wait_time_ns\":%lld}", (long long)th[i].run_ns,
                  (long long)th[i].wait_ns);
        if (!same_set(&th[i], cpus, ncpus)) {
            if (ok) snprintf(bad, badlen, "thread %ld (%s)", th[i].tid, th[i].name);
            ok = false;
        }
    }
    /* The CPU backend's parallelism as the OS shows it: the main thread plus every pool
     * thread the runtime created (XNNPACK's pthreadpool has threads-1 of them, the builtin
     * kernels keep Eigen's pool of `threads` and ruy's of threads-1). Fewer than the
     * scenario's threads means the backend ignored --threads: the pipeline refuses such a
     * record (pipelines/measure.py, check_threads). "active": pool threads that have run. */
    int pool = 0, active = 0;
    for (int i = 0; i < n && i < 512; i++) {
        if (th[i].tid == plat_process_id() || th[i].tid == writer_tid) continue;
        pool++;
        if (th[i].run_ns > 0) active++;
    }
    sb_printf(b, "],\"threads_observed\":%d,\"compute_threads_observed\":%d,\"runtime_threads_active\":%d,"
                 "\"affinity_ok\":%s", n, 1 + pool, active, ok ? "true" : "false");
    return ok ? NULL : bad;
}

static void cpus_json(sbuf *b, const int *cpus, int n) {
    sb_puts(b, "[");
    for (int i = 0; i < n; i++) sb_printf(b, i ? ",%d" : "%d", cpus[i]);
    sb_puts(b, "]");
}

/* ------------------------------------------------------------------------------------ */
/* the phases of main(), in their order (see the top of this file)                      */

/* What one phase hands on to the next. */
typedef struct {
    args_t a;
    int64_t wall_start, t_start; /* process start: provenance, trace origin, elapsed_ns */
    struct stat stm;             /* the model file */
    char model_abs[4096];
    int allowed[PLAT_MAX_CPUS], cpus[PLAT_MAX_CPUS];
    int ncpus;
    char allowed_str[256];
    writer *w;
    long writer_tid;
    char lib_abs[4096];
    LrEnvironment env;
    LrModel model;
    LrSignature sig;
    const char *sig_key;
    model_facts facts;
    bool profiling, fully;
    compiled_t main_cm, plain_cm; /* plain_cm: only for the overhead rounds of op/kernel mode */
    int64_t *warm;                /* warm-up t0, t1 pairs, recorded once meta is out */
    int64_t *dur;                 /* timed run durations */
    intern_t names;
    events_t E;
} session_t;

/* The CPU set as the user gave it, or the allowed set when --cpus is absent (messages). */
static const char *cpus_shown(const session_t *s) { return s->a.cpus_arg ? s->a.cpus_arg : s->allowed_str; }

/* What the crash handler writes (and exits with) if the runtime crashes from now on:
 * "latbench-run: error: <what> <model> (<why>", which the handler ends with the signal. */
static void crash_message(int code, const char *what, const char *model, const char *why) {
    char crash[4400];
    snprintf(crash, sizeof crash, "latbench-run: error: %s %s (%s", what, model, why);
    plat_set_crash_message(g_err_fd, crash, code);
}

/* A run record (phase warmup, timed or overhead), handed to the writer. Called after t1,
 * never inside a timed interval. */
static inline void push_run(writer *w, int phase, int run, bool profiled, const char *label,
                            int64_t start_ns, int64_t dur_ns) {
    record r = record_make(REC_RUN, run, start_ns, dur_ns);
    r.phase = (uint8_t)phase;
    r.profiled = profiled;
    r.label = label;
    writer_push(w, &r);
}

/* Step 1: the model file exists, is a readable file and looks like a .tflite (exit 3 or 4). */
static void check_model_file(session_t *s) {
    const args_t *a = &s->a;
    if (stat(a->model, &s->stm) != 0)
        die(EXIT_MODEL_MISSING, "model file not found: %s", a->model);
    if (!S_ISREG(s->stm.st_mode)) die(EXIT_MODEL_MISSING, "model path is not a file: %s", a->model);
    if (access(a->model, R_OK) != 0) die(EXIT_MODEL_MISSING, "model file not readable: %s", a->model);
    if (!realpath(a->model, s->model_abs)) snprintf(s->model_abs, sizeof s->model_abs, "%s", a->model);
    if (s->stm.st_size < 8) die(EXIT_MODEL_INVALID, "not a valid .tflite model (%lld bytes): %s",
                                (long long)s->stm.st_size, a->model);
    /* a flatbuffer with the TFLite file identifier "TFL3" at bytes 4..7 */
    unsigned char head[8] = {0};
    FILE *mf = fopen(a->model, "rb");
    size_t got = mf ? fread(head, 1, 8, mf) : 0;
    if (mf) fclose(mf);
    if (got != 8 || memcmp(head + 4, "TFL3", 4) != 0)
        die(EXIT_MODEL_INVALID, "not a valid .tflite model (no TFL3 identifier): %s", a->model);
}

/* Step 2a: the CPU set (--cpus, else every CPU the process may use now), validated against
 * what the process may use (exit 5; 2 if the list does not parse). */
static void choose_cpus(session_t *s) {
    const args_t *a = &s->a;
    int *allowed = s->allowed, *cpus = s->cpus;
    int n_allowed = plat_allowed_cpus(allowed, PLAT_MAX_CPUS);
    if (n_allowed <= 0) die(EXIT_CPUS, "cannot read the process's CPU affinity");
    {
        sbuf b;
        sb_init(&b);
        for (int i = 0; i < n_allowed; i++) sb_printf(&b, i ? ",%d" : "%d", allowed[i]);
        snprintf(s->allowed_str, sizeof s->allowed_str, "%s", b.s);
        sb_free(&b);
    }
    if (a->cpus_arg) {
        int ncpus = plat_parse_cpu_list(a->cpus_arg, cpus, PLAT_MAX_CPUS);
        if (ncpus == -2)
            die(EXIT_CPUS, "--cpus %s: no such CPU (CPUs this process may use: %s)", a->cpus_arg, s->allowed_str);
        if (ncpus <= 0) die(EXIT_USAGE, "--cpus: cannot parse '%s' (expected e.g. 0,1 or 0-3)", a->cpus_arg);
        for (int i = 0; i < ncpus; i++) {
            bool ok = false;
            for (int k = 0; k < n_allowed; k++) ok |= allowed[k] == cpus[i];
            if (!ok)
                die(EXIT_CPUS, "--cpus %s: CPU %d %s (CPUs this process may use: %s)", a->cpus_arg,
                    cpus[i], cpus[i] >= plat_num_cpus_configured() ? "does not exist" : "is not allowed",
                    s->allowed_str);
        }
        s->ncpus = ncpus;
    } else {
        s->ncpus = n_allowed;
        memcpy(cpus, allowed, sizeof(int) * (size_t)n_allowed);
    }
}

/* Step 2b: the whole process is pinned to the set while it is still the only thread, so the
 * writer and LiteRT's thread pool, started later, inherit it (exit 5). */
static void pin_to_cpus(session_t *s) {
    char err[512];
    if (plat_pin_process(s->cpus, s->ncpus, err, sizeof err) != 0)
        die(EXIT_CPUS, "cannot pin to CPUs %s: %s", cpus_shown(s), err);
}

/* Step 3: the asynchronous writer; its thread inherits the set (exit 7 if an output cannot
 * be opened). */
static void start_writer(session_t *s) {
    const args_t *a = &s->a;
    char pname[4500], err[512];
    const char *base = strrchr(s->model_abs, '/');
    snprintf(pname, sizeof pname, "latbench-run %s (%s, cpus %s, %d threads)", base ? base + 1 : s->model_abs,
             mode_names[a->mode], cpus_shown(s), a->threads);
    s->w = writer_open(a->records, a->trace, s->t_start, pname, err, sizeof err);
    if (!s->w) die(EXIT_OUTPUT, "%s", err);
    s->writer_tid = writer_thread_id(s->w);
}

/* Step 4a: the library's path (meta record), the GPU accelerator for --accelerator gpu, and
 * the LiteRT environment (exit 6). */
static void open_runtime(session_t *s) {
    const args_t *a = &s->a;
    Dl_info dli;
    const char *lib_path = dladdr((void *)&LiteRtCreateEnvironment, &dli) && dli.dli_fname ? dli.dli_fname : "?";
    if (!realpath(lib_path, s->lib_abs)) snprintf(s->lib_abs, sizeof s->lib_abs, "%s", lib_path);
    if (!strcmp(a->accelerator, "gpu")) {
        /* before the environment: the accelerator registers itself, and the Vulkan
         * loader reads the layer variables when Dawn creates its instance */
        char err[512];
        g_gpu = gpu_prepare(s->lib_abs, a->precision ? a->precision : "fp16", a->mode == MODE_KERNEL, err, sizeof err);
        if (!g_gpu) die(EXIT_RUNTIME, "%s", err);
    }
    LrStatus st = LiteRtCreateEnvironment(0, NULL, &s->env);
    if (st != LR_OK) die_lr(EXIT_RUNTIME, st, "cannot create the LiteRT environment");
}

/* Step 4b: the model and its first signature, read by the runtime (a failure or a crash
 * exits with 4); the checks that need its tensor types (exit 2). */
static void load_model(session_t *s) {
    const args_t *a = &s->a;
    crash_message(EXIT_MODEL_INVALID, "not a valid .tflite model:", a->model, "the runtime crashed reading it");
    LrStatus st = LiteRtCreateModelFromFile(s->env, a->model, &s->model);
    if (st != LR_OK) {
        char what[4200];
        snprintf(what, sizeof what, "not a valid .tflite model: %s", a->model);
        die_lr(EXIT_MODEL_INVALID, st, what);
    }
    LrParamIndex nsig = 0;
    LiteRtGetNumModelSignatures(s->model, &nsig);
    if (nsig < 1 || LiteRtGetModelSignature(s->model, 0, &s->sig) != LR_OK)
        die(EXIT_MODEL_INVALID, "model has no signature: %s", a->model);
    s->sig_key = NULL;
    LiteRtGetSignatureKey(s->sig, &s->sig_key);
    inspect_model(s->model, s->sig, &s->facts);
    if (g_gpu && strcmp(s->facts.detected, "fp32") && strcmp(s->facts.detected, "fp16"))
        die(EXIT_USAGE, "--accelerator gpu: %s is a %s model; the GPU runs float models (fp32 or fp16 weights)",
            a->model, s->facts.detected);
    /* on the GPU --precision is the compute precision, not the weights' type */
    if (!g_gpu && a->precision && strcmp(a->precision, s->facts.detected) != 0)
        die(EXIT_USAGE, "--precision %s does not match the model %s (its tensor types say %s)",
            a->precision, a->model, s->facts.detected);
}

/* Step 4c: the compiled model that is measured (profiling compiled in for op and kernel
 * mode on the CPU) and, for their overhead rounds, a plain one without it (exit 6). */
static void compile_models(session_t *s) {
    const args_t *a = &s->a;
    if (g_gpu) {
        /* the file has been read and inspected: a crash while the GPU accelerator compiles it
         * (e.g. an internal check of the accelerator trapping with SIGILL) is the runtime's */
        crash_message(EXIT_RUNTIME, "LiteRT's GPU accelerator crashed compiling", a->model, "runtime failure");
    }
    s->profiling = a->mode != MODE_E2E && !g_gpu; /* GPU kernels: the layer, not the profiler */
    memset(&s->plain_cm, 0, sizeof s->plain_cm);
    compile_model(&s->main_cm, s->env, s->model, s->sig, a, s->profiling, a->model);
    if (a->overhead_pairs > 0 && s->profiling)
        compile_model(&s->plain_cm, s->env, s->model, s->sig, a, false, a->model);
    s->fully = false;
    LiteRtCompiledModelIsFullyAccelerated(s->main_cm.cm, &s->fully);
}

/* Step 5a: the warm-up runs, timed like the timed runs; their records wait for meta. */
static void warm_up(session_t *s) {
    const args_t *a = &s->a;
    compiled_t *main_cm = &s->main_cm;
    bool profiling = s->profiling;
    if (!a->keep_memory_sampling) memsample_suppress(1); /* see memsample.h */

    /* warm-up (in the same condition as the timed runs); records kept until meta is out */
    int64_t *warm = s->warm = calloc((size_t)a->warmup + 1, 2 * sizeof(int64_t));
    for (int i = 0; i < a->warmup; i++) {
        if (profiling) LiteRtStartProfiler(main_cm->prof);
        int64_t t0, t1;
        check_run(timed_run(main_cm, &t0, &t1), a->model);
        if (profiling) LiteRtStopProfiler(main_cm->prof);
        if (g_gpu) gpu_after_run(g_gpu, s->w, -1, t0, t1);
        warm[2 * i] = t0;
        warm[2 * i + 1] = t1;
    }
    if (s->plain_cm.cm)
        for (int i = 0; i < a->warmup; i++) {
            int64_t t0, t1;
            check_run(timed_run(&s->plain_cm, &t0, &t1), a->model);
        }

    /* from here on a crash is the runtime's, not the file's (the first runs still read
     * the model, so the warm-up counts as loading) */
    crash_message(EXIT_RUNTIME, "LiteRT crashed running", a->model, "runtime failure");
}

/* Step 5b: the meta record, with every thread's CPU set read back from the OS (exit 5 if
 * one is outside the set); then the warm-up runs' records. */
static void write_meta(session_t *s) {
    const args_t *a = &s->a;
    writer *w = s->w;
    /* clock cost, accelerators, affinity -> meta */
    int64_t clk[257];
    for (int i = 0; i < 257; i++) clk[i] = plat_now_ns();
    int64_t dclk[256];
    for (int i = 0; i < 256; i++) dclk[i] = clk[i + 1] - clk[i];
    double clock_read_ns = median_i64(dclk, 256);

    sbuf m;
    sb_init(&m);
    char host[256];
    plat_hostname(host, sizeof host);
    sb_printf(&m, "{\"type\":\"meta\",\"tool\":\"latbench-run\",\"tool_version\":\"%s\",", TOOL_VERSION);
    sb_puts(&m, "\"runtime\":\"litert\",\"runtime_version\":");
    sb_json_str(&m, a->runtime_version);
    sb_puts(&m, ",\"library\":");
    sb_json_str(&m, s->lib_abs);
    sb_puts(&m, ",\"accelerators\":[");
    LrParamIndex nacc = 0;
    LiteRtGetNumAccelerators(s->env, &nacc);
    for (size_t i = 0; i < nacc; i++) {
        LrAccelerator acc;
        const char *aname = NULL;
        LrApiVersion v = {0, 0, 0};
        if (LiteRtGetAccelerator(s->env, i, &acc) != LR_OK) continue;
        LiteRtGetAcceleratorName(acc, &aname);
        LiteRtGetAcceleratorVersion(acc, &v);
        sb_puts(&m, i ? ",{\"name\":" : "{\"name\":");
        sb_json_str(&m, aname);
        sb_printf(&m, ",\"version\":\"%d.%d.%d\"}", v.major, v.minor, v.patch);
    }
    sb_puts(&m, "],\"model\":");
    sb_json_str(&m, s->model_abs);
    sb_printf(&m, ",\"model_bytes\":%lld,\"signature\":", (long long)s->stm.st_size);
    sb_json_str(&m, s->sig_key);
    sb_printf(&m, ",\"model_subgraphs\":%zu,\"model_ops\":%zu,\"precision\":", s->facts.subgraphs, s->facts.ops);
    sb_json_str(&m, a->precision ? a->precision : s->facts.detected);
    sb_puts(&m, ",\"precision_detected\":");
    sb_json_str(&m, s->facts.detected);
    sb_puts(&m, ",\"accelerator\":");
    sb_json_str(&m, a->accelerator);
    sb_puts(&m, ",\"cpus\":");
    cpus_json(&m, s->cpus, s->ncpus);
    sb_printf(&m, ",\"threads\":%d,\"mode\":\"%s\",\"cpu_kernel_mode\":\"%s\",\"profiling\":%s,"
                  "\"fully_accelerated\":%s,\"memory_sampling\":%s,\"warmup\":%d,\"runs\":%d,\"overhead_pairs\":%d,",
              a->threads, mode_names[a->mode], a->mode == MODE_OP ? "builtin" : "xnnpack",
              s->profiling ? "true" : "false", s->fully ? "true" : "false",
              a->keep_memory_sampling ? "true" : "false", a->warmup, a->runs, a->overhead_pairs);
    sb_puts(&m, "\"hostname\":");
    sb_json_str(&m, host);
    sb_printf(&m, ",\"pid\":%ld,\"clock\":\"%s\",\"clock_resolution_ns\":%lld,\"clock_read_ns\":%.0f,"
                  "\"profiler_resolution_ns\":1000,\"start_unix_ns\":%lld,\"writer_policy\":\"%s\",",
              plat_process_id(), plat_clock_name(), (long long)plat_clock_resolution_ns(), clock_read_ns,
              (long long)s->wall_start, writer_is_background(w) ? plat_background_policy_name() : "default");
    char bad[128];
    const char *bad_thread = affinity_json(&m, s->cpus, s->ncpus, s->writer_tid, bad, sizeof bad);
    if (g_gpu) gpu_meta_json(g_gpu, &m);
    sb_puts(&m, "}");
    writer_push_raw(w, sb_take(&m));
    if (bad_thread)
        die(EXIT_CPUS, "%s runs outside the requested CPU set %s after the model was compiled",
            bad_thread, cpus_shown(s));
    for (int i = 0; i < a->warmup; i++)
        push_run(w, PHASE_WARMUP, i, s->profiling, NULL, s->warm[2 * i], s->warm[2 * i + 1] - s->warm[2 * i]);
    free(s->warm);
    s->warm = NULL;
}

/* Step 6: the timed runs. Each is timed_run() alone; starting and stopping the profiler,
 * the run record, the events and the GPU's kernel records all stay outside [t0, t1]. */
static void timed_runs(session_t *s) {
    const args_t *a = &s->a;
    compiled_t *main_cm = &s->main_cm;
    writer *w = s->w;
    bool profiling = s->profiling;
    s->E.dump = getenv("LATBENCH_DUMP_EVENTS") && !strcmp(getenv("LATBENCH_DUMP_EVENTS"), "1");
    int64_t *dur = s->dur = calloc((size_t)a->runs, sizeof(int64_t));
    for (int i = 0; i < a->runs; i++) {
        if (profiling) LiteRtStartProfiler(main_cm->prof); /* also clears the last run's events */
        int64_t t0, t1;
        LrStatus rs = timed_run(main_cm, &t0, &t1);
        if (profiling) LiteRtStopProfiler(main_cm->prof);
        check_run(rs, a->model);
        dur[i] = t1 - t0;
        push_run(w, PHASE_TIMED, i, profiling, NULL, t0, t1 - t0);
        if (profiling) collect_events(main_cm, &s->E, &s->names, w, i, t0, a->mode);
        if (g_gpu) gpu_after_run(g_gpu, w, i, t0, t1);
    }
}

/* Step 7 without the profiler (e2e mode; the GPU in any mode), as an overhead record.
 * overhead in e2e mode: what the instrument itself adds to a run. Per round, K runs
 * timed as the timed runs are (two clock reads each, a record handed to the writer)
 * and K runs timed as one block (two clock reads for all K, no records), in alternating
 * order; the uninstrumented run time is the block's time / K. */
static void overhead_e2e(session_t *s) {
    const args_t *a = &s->a;
    compiled_t *main_cm = &s->main_cm;
    writer *w = s->w;
    enum { K = 5 };
    int P = a->overhead_pairs;
    int64_t *inst = calloc((size_t)P, sizeof(int64_t)), *block = calloc((size_t)P, sizeof(int64_t));
    double *ratio = calloc((size_t)P, sizeof(double));
    int seq = 0;
    for (int p = 0; p < P; p++) {
        for (int j = 0; j < 2; j++) {
            bool blocked = (j + p) % 2 == 1;
            if (blocked) {
                int64_t b0 = plat_now_ns();
                for (int k = 0; k < K; k++)
                    check_run(LiteRtRunCompiledModel(main_cm->cm, 0, main_cm->n_in, main_cm->in, main_cm->n_out,
                                                     main_cm->out), a->model);
                if (main_cm->read_back) check_run(read_outputs(main_cm), a->model);
                int64_t b1 = plat_now_ns();
                block[p] = (b1 - b0) / K;
                push_run(w, PHASE_OVERHEAD, seq++, false, "block", b0, b1 - b0);
            } else {
                int64_t dk[K];
                for (int k = 0; k < K; k++) {
                    int64_t t0, t1;
                    check_run(timed_run(main_cm, &t0, &t1), a->model);
                    dk[k] = t1 - t0;
                    push_run(w, PHASE_OVERHEAD, seq++, false, "instrumented", t0, t1 - t0);
                }
                int64_t sum = 0;
                for (int k = 0; k < K; k++) sum += dk[k];
                inst[p] = sum / K;
            }
        }
        ratio[p] = block[p] > 0 ? (double)inst[p] / (double)block[p] : 0;
    }
    double med_inst = median_i64(inst, P), med_block = median_i64(block, P), med_ratio = median_dbl(ratio, P);
    sbuf m;
    sb_init(&m);
    sb_printf(&m,
              "{\"type\":\"overhead\",\"mode\":\"e2e\",\"pairs\":%d,\"runs_per_condition\":%d,"
              "\"baseline\":\"block: %d runs timed as one interval, without per-run clock reads or records\","
              "\"median_unprofiled_ns\":%.0f,\"median_profiled_ns\":%.0f,\"ratio\":%.6f,"
              "\"median_pair_ratio\":%.6f,\"memory_sampling\":false}",
              P, K, K, med_block, med_inst, med_block > 0 ? med_inst / med_block : 0, med_ratio);
    writer_push_raw(w, sb_take(&m));
    free(inst);
    free(block);
    free(ratio);
}

/* Step 7 with the profiler (op and kernel mode on the CPU), as an overhead record.
 * overhead: rounds of plain / armed / profiled in rotating order */
static void overhead_profiled(session_t *s) {
    const args_t *a = &s->a;
    compiled_t *main_cm = &s->main_cm, *plain_cm = &s->plain_cm;
    writer *w = s->w;
    bool profiling = s->profiling;
    int P = a->overhead_pairs;
    int64_t *d[3];
    for (int k = 0; k < 3; k++) d[k] = calloc((size_t)P, sizeof(int64_t));
    double *pair_ratio = calloc((size_t)P, sizeof(double));
    double *rec_ratio = calloc((size_t)P, sizeof(double));
    static const char *cond[3] = {"plain", "armed", "profiled"};
    int seq = 0;
    for (int p = 0; p < P; p++) {
        for (int j = 0; j < 3; j++) {
            int k = (j + p) % 3;
            compiled_t *c = (!plain_cm->cm || k != 0) ? main_cm : plain_cm;
            bool rec = profiling && k == 2;
            if (rec) LiteRtStartProfiler(c->prof);
            int64_t t0, t1;
            LrStatus rs = timed_run(c, &t0, &t1);
            if (rec) LiteRtStopProfiler(c->prof);
            check_run(rs, a->model);
            d[k][p] = t1 - t0;
            push_run(w, PHASE_OVERHEAD, seq++, rec, cond[k], t0, t1 - t0);
        }
        pair_ratio[p] = d[0][p] > 0 ? (double)d[2][p] / (double)d[0][p] : 0;
        rec_ratio[p] = d[1][p] > 0 ? (double)d[2][p] / (double)d[1][p] : 0;
    }
    double med_plain = median_i64(d[0], P), med_armed = median_i64(d[1], P),
           med_prof = median_i64(d[2], P), med_pair = median_dbl(pair_ratio, P),
           med_rec = median_dbl(rec_ratio, P);
    sbuf m;
    sb_init(&m);
    sb_printf(&m,
              "{\"type\":\"overhead\",\"mode\":\"%s\",\"pairs\":%d,\"baseline\":\"%s\","
              "\"median_unprofiled_ns\":%.0f,\"median_armed_ns\":%.0f,\"median_profiled_ns\":%.0f,"
              "\"ratio\":%.6f,\"ratio_armed\":%.6f,\"median_pair_ratio\":%.6f,"
              "\"median_recording_ratio\":%.6f,\"memory_sampling\":%s}",
              mode_names[a->mode], P, "plain: a second compiled model of the same file without the profiling option",
              med_plain, med_armed, med_prof, med_plain > 0 ? med_prof / med_plain : 0,
              med_plain > 0 ? med_armed / med_plain : 0, med_pair, med_rec,
              a->keep_memory_sampling ? "true" : "false");
    writer_push_raw(w, sb_take(&m));
    for (int k = 0; k < 3; k++) free(d[k]);
    free(pair_ratio);
    free(rec_ratio);
}

/* Step 8: the end record, the writer drained and closed (exit 7 if any write failed), then
 * the verdict of the final affinity read-back (exit 5). */
static void write_end(session_t *s) {
    const args_t *a = &s->a;
    writer *w = s->w;
    /* end record: the affinity once more, after everything ran */
    sbuf m;
    sb_init(&m);
    double med = median_i64(s->dur, a->runs);
    sb_printf(&m, "{\"type\":\"end\",\"timed_runs\":%d,\"median_run_ns\":%.0f,\"profiler_events\":%lld,"
                  "\"names\":%zu,\"producer_waits\":%lld,\"elapsed_ns\":%lld,",
              a->runs, med, (long long)s->E.events_total, s->names.n, (long long)writer_producer_waits(w),
              (long long)(plat_now_ns() - s->t_start));
    if (g_gpu) gpu_end_json(g_gpu, &m);
    char bad[128];
    const char *bad_thread = affinity_json(&m, s->cpus, s->ncpus, s->writer_tid, bad, sizeof bad);
    sb_puts(&m, "}");
    writer_push_raw(w, sb_take(&m));
    free(s->dur);
    s->dur = NULL;

    char err[512];
    if (writer_close(w, err, sizeof err) != 0) die(EXIT_OUTPUT, "%s", err);
    if (bad_thread)
        die(EXIT_CPUS, "%s ran outside the requested CPU set %s", bad_thread, cpus_shown(s));
}

/* Cleanup: the compiled models, the model, the environment, the event buffer. */
static void release_runtime(session_t *s) {
    destroy_compiled(&s->plain_cm);
    destroy_compiled(&s->main_cm);
    LiteRtDestroyModel(s->model);
    LiteRtDestroyEnvironment(s->env);
    free(s->E.ev);
}

/* The steps of the top of this file, in order. A phase that fails ends the process
 * itself, through die() or die_lr(): one line on the original stderr and the exit code
 * of print_help(); none returns an error. */
int main(int argc, char **argv) {
    static session_t s; /* static: zeroed, and its CPU lists are large */
    s.wall_start = plat_wall_ns();
    s.t_start = plat_now_ns();
    parse_args(argc, argv, &s.a);
    if (!s.a.verbose) capture_library_stderr();
    check_model_file(&s);
    plat_install_crash_handler();

    choose_cpus(&s);
    pin_to_cpus(&s); /* before any thread exists: see pin_to_cpus */
    start_writer(&s);

    open_runtime(&s);
    load_model(&s);
    compile_models(&s);

    warm_up(&s);
    write_meta(&s);
    timed_runs(&s);
    if (s.a.outputs) dump_outputs(&s.main_cm, s.a.outputs);

    if (s.a.overhead_pairs > 0 && !s.profiling) overhead_e2e(&s);
    if (s.a.overhead_pairs > 0 && s.profiling) overhead_profiled(&s);

    write_end(&s);
    release_runtime(&s);
    return EXIT_OK;
}
