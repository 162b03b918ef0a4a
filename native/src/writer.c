#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "sbuf.h"

#define RING_CAP (1u << 15) /* records; 64 B each: 2 MiB */
#define RING_MASK (RING_CAP - 1)

enum { TID_RUNS = 1, TID_OPS = 2, TID_KERNELS = 3, TID_RUNTIME = 4, TID_GPU = 5 };

struct writer {
    record *ring;
    _Atomic uint64_t head; /* next slot the writer reads */
    _Atomic uint64_t tail; /* next slot the producer fills */
    _Atomic int sleeping;  /* the writer waits on kick */
    _Atomic int closing;
    _Atomic long tid;
    bool background;
    sem_t kick;
    pthread_t thread;
    int64_t producer_waits;

    FILE *rec;
    FILE *trace;
    char *rec_buf, *trace_buf;
    int64_t t0_ns;
    long trace_pid;
    bool trace_first;
    int failed; /* an fwrite/fprintf failed */
    bool gpu_track; /* the "gpu" track's name was written */
    /* kernel layout state (writer thread only) */
    int32_t lay_run;
    int64_t lay_anchor, lay_cursor;
};

static const char *phase_name(int p) {
    return p == PHASE_WARMUP ? "warmup" : p == PHASE_TIMED ? "timed" : "overhead";
}

static void ts_us(FILE *f, int64_t ns_rel) {
    /* microseconds with ns precision, as Chrome's trace format expects */
    if (ns_rel < 0) {
        fputc('-', f);
        ns_rel = -ns_rel;
    }
    fprintf(f, "%lld.%03lld", (long long)(ns_rel / 1000), (long long)(ns_rel % 1000));
}

static void trace_begin_event(writer *w) {
    if (!w->trace_first) fputs(",\n", w->trace);
    w->trace_first = false;
}

static void trace_x(writer *w, int tid, const char *name, int64_t start_ns, int64_t dur_ns) {
    trace_begin_event(w);
    fputs("{\"ph\":\"X\",\"name\":", w->trace);
    fput_json_str(w->trace, name);
    fprintf(w->trace, ",\"pid\":%ld,\"tid\":%d,\"ts\":", w->trace_pid, tid);
    ts_us(w->trace, start_ns - w->t0_ns);
    fputs(",\"dur\":", w->trace);
    ts_us(w->trace, dur_ns);
}

static void write_record(writer *w, const record *r) {
    FILE *f = w->rec;
    switch (r->type) {
        case REC_RAW:
            fputs(r->name, f);
            fputc('\n', f);
            free((void *)r->name);
            return;
        case REC_GPU_KERNEL:
            fputs(r->name, f);
            fputc('\n', f);
            if (w->trace) {
                if (!w->gpu_track) { /* named on first use: CPU-only traces keep their four tracks */
                    w->gpu_track = true;
                    trace_begin_event(w);
                    fprintf(w->trace,
                            "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%d,\"args\":{\"name\":\"gpu\"}}",
                            w->trace_pid, TID_GPU);
                }
                trace_x(w, TID_GPU, r->label, r->start_ns, r->dur_ns);
                fprintf(w->trace, ",\"args\":{\"run\":%d,\"order\":%d}}", r->run, r->order);
            }
            free((void *)r->name);
            free((void *)r->label);
            return;
        case REC_RUN:
            fprintf(f,
                    "{\"type\":\"run\",\"phase\":\"%s\",\"run\":%d,\"start_ns\":%lld,"
                    "\"end_ns\":%lld,\"duration_ns\":%lld,\"profiled\":%s",
                    phase_name(r->phase), r->run, (long long)r->start_ns,
                    (long long)(r->start_ns + r->dur_ns), (long long)r->dur_ns,
                    r->profiled ? "true" : "false");
            if (r->label) {
                fputs(",\"condition\":", f);
                fput_json_str(f, r->label);
            }
            fputs("}\n", f);
            if (w->trace) {
                char name[96];
                snprintf(name, sizeof name, "run %d (%s%s%s)", r->run, phase_name(r->phase),
                         r->label ? ", " : "", r->label ? r->label : "");
                trace_x(w, TID_RUNS, name, r->start_ns, r->dur_ns);
                fprintf(w->trace, ",\"args\":{\"run\":%d,\"phase\":\"%s\",\"profiled\":%s}}",
                        r->run, phase_name(r->phase), r->profiled ? "true" : "false");
            }
            return;
        case REC_OP:
        case REC_RUNTIME:
            fprintf(f, "{\"type\":\"%s\",\"run\":%d,\"order\":%d,",
                    r->type == REC_OP ? "op" : "runtime", r->run, r->order);
            if (r->type == REC_OP)
                fprintf(f, "\"node\":%d,\"subgraph\":%d,", r->node, r->subgraph);
            fputs("\"name\":", f);
            fput_json_str(f, r->name);
            fprintf(f, ",\"start_ns\":%lld,\"duration_ns\":%lld", (long long)r->start_ns,
                    (long long)r->dur_ns);
            fputs("}\n", f);
            if (w->trace) {
                trace_x(w, r->type == REC_OP ? TID_OPS : TID_RUNTIME, r->name, r->start_ns,
                        r->dur_ns);
                if (r->type == REC_OP)
                    fprintf(w->trace, ",\"args\":{\"run\":%d,\"node\":%d,\"order\":%d}}", r->run,
                            r->node, r->order);
                else
                    fprintf(w->trace, ",\"args\":{\"run\":%d}}", r->run);
            }
            return;
        case REC_KERNEL: {
            fprintf(f, "{\"type\":\"kernel\",\"run\":%d,\"order\":%d,\"name\":", r->run, r->order);
            fput_json_str(f, r->name);
            fprintf(f, ",\"duration_ns\":%lld,\"source\":\"%s\"", (long long)r->dur_ns,
                    r->flags == SRC_BUILTIN ? "builtin" : "xnnpack");
            if (r->flags == SRC_XNNPACK)
                fprintf(f, ",\"partition\":%d,\"index_in_partition\":%d", r->subgraph, r->sub_index);
            else
                fprintf(f, ",\"node\":%d,\"start_ns\":%lld", r->node, (long long)r->start_ns);
            fputs("}\n", f);
            if (w->trace) {
                int64_t start = r->start_ns;
                const char *layout = "measured";
                if (start < 0) {
                    /* XNNPACK reports no start time: lay the kernels of one partition out
                     * back to back from the partition's start. */
                    if (r->run != w->lay_run || r->anchor_ns != w->lay_anchor) {
                        w->lay_run = r->run;
                        w->lay_anchor = r->anchor_ns;
                        w->lay_cursor = r->anchor_ns;
                    }
                    start = w->lay_cursor;
                    w->lay_cursor += r->dur_ns;
                    layout = "sequential from partition start (XNNPACK reports no start time)";
                }
                trace_x(w, TID_KERNELS, r->name, start, r->dur_ns);
                if (r->flags == SRC_XNNPACK)
                    fprintf(w->trace,
                            ",\"args\":{\"run\":%d,\"order\":%d,\"partition\":%d,\"index_in_partition\":%d,"
                            "\"start\":\"%s\"}}",
                            r->run, r->order, r->subgraph, r->sub_index, layout);
                else
                    fprintf(w->trace, ",\"args\":{\"run\":%d,\"order\":%d,\"node\":%d,\"start\":\"%s\"}}",
                            r->run, r->order, r->node, layout);
            }
            return;
        }
    }
}

static void drain(writer *w) {
    uint64_t head = atomic_load_explicit(&w->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&w->tail, memory_order_acquire);
    while (head != tail) {
        write_record(w, &w->ring[head & RING_MASK]);
        head++;
        atomic_store_explicit(&w->head, head, memory_order_release);
        if (head == tail) tail = atomic_load_explicit(&w->tail, memory_order_acquire);
    }
}

static void *writer_main(void *arg) {
    writer *w = arg;
    w->background = plat_make_current_thread_background() == 0;
    atomic_store(&w->tid, plat_thread_id()); /* publishes background too */
    for (;;) {
        drain(w);
        if (atomic_load(&w->closing)) {
            drain(w);
            break;
        }
        atomic_store(&w->sleeping, 1);
        if (atomic_load(&w->tail) != atomic_load(&w->head) || atomic_load(&w->closing)) {
            atomic_store(&w->sleeping, 0);
            continue;
        }
        while (sem_wait(&w->kick) != 0 && errno == EINTR) {
        }
        atomic_store(&w->sleeping, 0);
    }
    return NULL;
}

static void kick(writer *w) {
    if (atomic_load(&w->sleeping)) sem_post(&w->kick);
}

writer *writer_open(const char *records_path, const char *trace_path, int64_t t0_ns,
                    const char *trace_process_name, char *err, size_t errlen) {
    writer *w = calloc(1, sizeof *w);
    if (!w) abort();
    w->ring = calloc(RING_CAP, sizeof(record));
    if (!w->ring) abort();
    w->t0_ns = t0_ns;
    w->trace_pid = plat_process_id();
    w->trace_first = true;
    w->lay_run = -1;
    if (strcmp(records_path, "-") == 0) {
        w->rec = stdout;
    } else {
        w->rec = fopen(records_path, "w");
        if (!w->rec) {
            snprintf(err, errlen, "cannot write records file %s: %s", records_path, strerror(errno));
            free(w->ring);
            free(w);
            return NULL;
        }
    }
    w->rec_buf = malloc(1 << 20);
    setvbuf(w->rec, w->rec_buf, _IOFBF, 1 << 20);
    if (trace_path) {
        w->trace = fopen(trace_path, "w");
        if (!w->trace) {
            snprintf(err, errlen, "cannot write trace file %s: %s", trace_path, strerror(errno));
            if (w->rec != stdout) fclose(w->rec);
            free(w->rec_buf);
            free(w->ring);
            free(w);
            return NULL;
        }
        w->trace_buf = malloc(1 << 20);
        setvbuf(w->trace, w->trace_buf, _IOFBF, 1 << 20);
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", w->trace);
        trace_begin_event(w);
        fprintf(w->trace, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%ld,\"args\":{\"name\":",
                w->trace_pid);
        fput_json_str(w->trace, trace_process_name);
        fputs("}}", w->trace);
        static const char *tracks[] = {"", "runs", "ops", "kernels", "runtime"};
        for (int t = TID_RUNS; t <= TID_RUNTIME; t++) {
            trace_begin_event(w);
            fprintf(w->trace,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%d,"
                    "\"args\":{\"name\":\"%s\"}},\n"
                    "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%ld,\"tid\":%d,"
                    "\"args\":{\"sort_index\":%d}}",
                    w->trace_pid, t, tracks[t], w->trace_pid, t, t);
        }
    }
    if (sem_init(&w->kick, 0, 0) != 0) abort();
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        snprintf(err, errlen, "cannot start the writer thread");
        return NULL;
    }
    while (atomic_load(&w->tid) == 0) plat_sleep_us(50);
    return w;
}

long writer_thread_id(writer *w) { return atomic_load(&w->tid); }

bool writer_is_background(writer *w) { return w->background; }

void writer_push(writer *w, const record *r) {
    uint64_t tail = atomic_load_explicit(&w->tail, memory_order_relaxed);
    while (tail - atomic_load_explicit(&w->head, memory_order_acquire) >= RING_CAP) {
        w->producer_waits++;
        kick(w);
        plat_sleep_us(200);
    }
    w->ring[tail & RING_MASK] = *r;
    atomic_store_explicit(&w->tail, tail + 1, memory_order_seq_cst);
    if (tail + 1 - atomic_load_explicit(&w->head, memory_order_relaxed) >= RING_CAP / 2) kick(w);
}

record record_make(int type, int32_t run, int64_t start_ns, int64_t dur_ns) {
    record r;
    memset(&r, 0, sizeof r);
    r.type = (uint8_t)type;
    r.run = run;
    r.start_ns = start_ns;
    r.dur_ns = dur_ns;
    return r;
}

void writer_push_raw(writer *w, char *line) {
    record r = record_make(REC_RAW, 0, 0, 0);
    r.name = line;
    writer_push(w, &r);
}

void writer_flush(writer *w) { kick(w); }

int64_t writer_producer_waits(writer *w) { return w->producer_waits; }

int writer_close(writer *w, char *err, size_t errlen) {
    atomic_store(&w->closing, 1);
    sem_post(&w->kick);
    pthread_join(w->thread, NULL);
    int rc = 0;
    if (ferror(w->rec) || fflush(w->rec) != 0) rc = -1;
    if (w->rec != stdout && fclose(w->rec) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "writing the records file failed: %s", strerror(errno));
    if (w->trace) {
        fputs("\n]}\n", w->trace);
        if (ferror(w->trace) || fclose(w->trace) != 0) {
            if (!rc) snprintf(err, errlen, "writing the trace file failed: %s", strerror(errno));
            rc = -1;
        }
    }
    sem_destroy(&w->kick);
    free(w->rec_buf);
    free(w->trace_buf);
    free(w->ring);
    free(w);
    return rc;
}
