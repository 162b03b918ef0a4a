/* Asynchronous record writer.
 *
 * The measuring thread hands fixed-size records to a bounded single-producer /
 * single-consumer ring (no lock, no system call on the fast path) and never formats or
 * writes anything itself. A writer thread drains the ring into the JSON-lines file and
 * the Chrome-trace / Perfetto file. The writer is woken only when the ring is half full
 * or at the end (writer_flush / writer_close), and runs in the lowest scheduling class
 * (SCHED_IDLE on Linux) inside the measured CPU set, so it gets CPU time when the
 * measured threads leave some; if the ring fills up, the producer waits, outside any
 * timed region.
 */
#ifndef LATBENCH_WRITER_H
#define LATBENCH_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rec_type { REC_RUN = 1, REC_OP, REC_KERNEL, REC_RUNTIME, REC_RAW,
                /* a GPU command (gpu.c): name = its whole JSON line, label = the trace
                 * event's name, both malloc'd and freed by the writer; start_ns/dur_ns on
                 * the host clock, drawn on the "gpu" track */
                REC_GPU_KERNEL };
enum rec_phase { PHASE_WARMUP = 0, PHASE_TIMED = 1, PHASE_OVERHEAD = 2 };
/* where a kernel record comes from */
enum rec_source { SRC_XNNPACK = 0, SRC_BUILTIN = 1 };

typedef struct {
    uint8_t type;     /* rec_type */
    uint8_t phase;    /* rec_phase (run records) */
    uint8_t profiled; /* run records: the profiler was recording during this run */
    uint8_t flags;    /* kernel: rec_source */
    int32_t run;      /* run index within its phase */
    int32_t node;     /* TFLite node index, -1 if unknown */
    int32_t subgraph; /* op: TFLite subgraph index; xnnpack kernel: partition ordinal */
    int32_t order;    /* position of the event within its run */
    int32_t sub_index; /* kernel: index of the XNNPACK operator inside its partition */
    int64_t start_ns; /* -1 if unknown */
    int64_t dur_ns;
    int64_t anchor_ns; /* kernel without start time: where its partition started */
    const char *name;  /* interned (never freed before the writer closes); REC_RAW: the
                          whole JSON line, malloc'd, freed by the writer */
    const char *label; /* run records: condition label ("plain", "armed", ...) or NULL */
} record;

/* A record of one type over [start_ns, start_ns + dur_ns) of run `run`, every other field
 * zero: the one place records are made, so a field added later starts at zero for every kind
 * (callers set what their kind needs). */
record record_make(int type, int32_t run, int64_t start_ns, int64_t dur_ns);

typedef struct writer writer;

/* Opens both outputs (trace_path may be NULL) and starts the writer thread. The thread
 * inherits the caller's CPU affinity. t0_ns is the origin of trace timestamps.
 * Returns NULL with a message in err on failure. */
writer *writer_open(const char *records_path, const char *trace_path, int64_t t0_ns,
                    const char *trace_process_name, char *err, size_t errlen);
/* Thread id of the writer thread (for the affinity report). */
long writer_thread_id(writer *w);
/* Whether the writer got the background scheduling class. */
bool writer_is_background(writer *w);
/* Copies the record into the ring; waits (sleeping) only if the ring is full. */
void writer_push(writer *w, const record *r);
/* Pushes a complete JSON line (without newline); takes ownership of line. */
void writer_push_raw(writer *w, char *line);
/* Wakes the writer so that everything pushed so far gets written soon. */
void writer_flush(writer *w);
/* Number of times the producer had to wait for room. */
int64_t writer_producer_waits(writer *w);
/* Drains, closes both files, joins the thread. Returns 0, or -1 with err filled if
 * writing failed at any point. */
int writer_close(writer *w, char *err, size_t errlen);

#endif
