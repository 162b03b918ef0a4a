/* GPU accelerator and GPU kernel timing for latbench-run; see gpu.h. */
#define _GNU_SOURCE
#include "gpu.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../vklayer/lbvk.h"
#include "clocksync.h"
#include "platform.h"

#ifdef LATBENCH_HAVE_VULKAN
#include <vulkan/vulkan.h>
#endif

/* Clock-sync parameters (clocksync.h). k: a command buffer per run is typical for
 * Dawn, so a refit every 8 pairs follows the offset within a few runs; the sigma floor
 * is one microsecond, the scale of a software queue's wake-up jitter; a slope is adopted
 * only once the history of accepted pairs spans a second of host time or more: over less,
 * the envelope has under 20 bins, and under CPU load its slope was seen 5e-5 to 1.6e-4 off
 * in the middle of lavapipe streams, which a fit left stale by a stretch of rejected pairs
 * turns into kernels mapped late (docs/gpu.md); until then a = 1, whose error is the drift
 * times one refit period (a few microseconds at 100 ppm), and the offset follows the clocks. */
#define SYNC_K 8
#define SYNC_SIGMA_FLOOR_NS 1000.0
#define SYNC_MIN_SPAN_NS 1e9
#define INJECT_N 3 /* nnPerf injects three empty kernels (Eq. 2) */

struct gpu_state {
    char precision[8];
    char toml[256];
    /* the Vulkan device the probe found */
    char device[256];
    char device_type[16];
    uint32_t vk_api, vk_driver;
    int n_devices;
    /* the layer */
    bool kernels;
    const lbvk_api *api;
    char layer_dir[PATH_MAX];
    lbvk_record *buf;
    int cap;
    /* the sync */
    clocksync cs;
    int bootstrap_pairs;
    double sigma0;
    int64_t sync_ns, syncs;
    int64_t kernels_recorded, kernels_outside_run, commands_seen, injected_seen;
    int64_t last_gpu_end_ns, pairs_busy; /* GPU end of the latest command; pairs skipped as busy */
    int64_t layer_self_ns_at_start;
    uint64_t intercepts_at_start;
};

bool gpu_kernels_on(const gpu_state *g) { return g && g->kernels; }

/* ------------------------------------------------------------------ Vulkan probe */
#ifdef LATBENCH_HAVE_VULKAN
static const char *device_type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
        default: return "other";
    }
}

/* Creates a throw-away instance and lists the physical devices: the one-line error when
 * there is none is far clearer than Dawn's "no adapter" deep inside compilation. */
static int probe_vulkan(gpu_state *g, char *err, size_t errlen) {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "--accelerator gpu: no Vulkan loader (libvulkan.so.1 not found); "
                              "install a Vulkan driver (scripts/setup.sh installs Mesa's lavapipe)");
        return -1;
    }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
    PFN_vkCreateInstance create = gipa ? (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance") : NULL;
    VkInstance inst = VK_NULL_HANDLE;
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "latbench-run probe", 1, NULL, 0,
                             VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    if (!create || create(&ci, NULL, &inst) != VK_SUCCESS) {
        snprintf(err, errlen, "--accelerator gpu: no Vulkan device (cannot create a Vulkan instance: no usable "
                              "driver; scripts/setup.sh installs Mesa's lavapipe)");
        dlclose(lib);
        return -1;
    }
    PFN_vkEnumeratePhysicalDevices enumerate =
        (PFN_vkEnumeratePhysicalDevices)gipa(inst, "vkEnumeratePhysicalDevices");
    PFN_vkGetPhysicalDeviceProperties props_fn =
        (PFN_vkGetPhysicalDeviceProperties)gipa(inst, "vkGetPhysicalDeviceProperties");
    PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)gipa(inst, "vkDestroyInstance");
    uint32_t n = 0;
    enumerate(inst, &n, NULL);
    VkPhysicalDevice pds[16];
    if (n > 16) n = 16;
    if (n) enumerate(inst, &n, pds);
    g->n_devices = (int)n;
    if (n) {
        VkPhysicalDeviceProperties p;
        props_fn(pds[0], &p);
        snprintf(g->device, sizeof g->device, "%s", p.deviceName);
        snprintf(g->device_type, sizeof g->device_type, "%s", device_type_name(p.deviceType));
        g->vk_api = p.apiVersion;
        g->vk_driver = p.driverVersion;
    }
    destroy(inst, NULL);
    dlclose(lib);
    if (!n) {
        snprintf(err, errlen, "--accelerator gpu: no Vulkan device (the Vulkan loader found no driver with a "
                              "device; scripts/setup.sh installs Mesa's lavapipe)");
        return -1;
    }
    return 0;
}
#else
static int probe_vulkan(gpu_state *g, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    snprintf(g->device, sizeof g->device, "unknown (built without Vulkan headers)");
    return 0;
}
#endif

/* ------------------------------------------------------------------ the layer */
static int enable_layer(gpu_state *g, char *err, size_t errlen) {
    const char *dir = getenv("LATBENCH_VKLAYER_DIR");
    if (dir && *dir) {
        snprintf(g->layer_dir, sizeof g->layer_dir, "%s", dir);
    } else {
        /* built beside the binary: <build>/vklayer/ */
        char exe[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len <= 0) {
            snprintf(err, errlen, "--mode kernel on GPU: cannot locate the binary to find vklayer/ "
                                  "(set LATBENCH_VKLAYER_DIR)");
            return -1;
        }
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(g->layer_dir, sizeof g->layer_dir, "%.*s/vklayer", (int)(sizeof g->layer_dir - 16), exe);
    }
    char lib[PATH_MAX + 64], manifest[PATH_MAX + 64];
    snprintf(lib, sizeof lib, "%s/libVkLayer_latbench_timestamps.so", g->layer_dir);
    snprintf(manifest, sizeof manifest, "%s/VkLayer_latbench_timestamps.json", g->layer_dir);
    if (access(lib, R_OK) != 0 || access(manifest, R_OK) != 0) {
        snprintf(err, errlen, "--mode kernel on GPU: the timestamp layer is not built (%s missing; run native/build.sh "
                              "with the Vulkan headers installed)", access(lib, R_OK) ? lib : manifest);
        return -1;
    }
    /* loaded here first: the Vulkan loader's own dlopen of the same file returns this instance */
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    lbvk_api_fn fn = h ? (lbvk_api_fn)dlsym(h, LBVK_API_SYMBOL) : NULL;
    g->api = fn ? fn() : NULL;
    if (!g->api || g->api->version != LBVK_API_VERSION) {
        snprintf(err, errlen, "--mode kernel on GPU: cannot load the timestamp layer %s: %s", lib,
                 h ? "wrong interface version" : dlerror());
        return -1;
    }
    /* the loader reads these when Dawn creates its Vulkan instance */
    const char *old = getenv("VK_ADD_LAYER_PATH");
    char path[2 * PATH_MAX + 2];
    snprintf(path, sizeof path, "%s%s%s", g->layer_dir, old && *old ? ":" : "", old && *old ? old : "");
    setenv("VK_ADD_LAYER_PATH", path, 1);
    old = getenv("VK_INSTANCE_LAYERS");
    char layers[1024];
    snprintf(layers, sizeof layers, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", LBVK_LAYER_NAME);
    setenv("VK_INSTANCE_LAYERS", layers, 1);
    g->cap = 4096;
    g->buf = calloc((size_t)g->cap, sizeof *g->buf);
    if (!g->buf) abort();
    return 0;
}

/* ------------------------------------------------------------------ prepare */
gpu_state *gpu_prepare(const char *litert_lib_path, const char *precision, bool kernels, char *err, size_t errlen) {
    gpu_state *g = calloc(1, sizeof *g);
    if (!g) abort();
    snprintf(g->precision, sizeof g->precision, "%s", precision);
    /* LiteRtDelegatePrecision: 1 = fp16, 2 = fp32 */
    snprintf(g->toml, sizeof g->toml, "precision = %d\n", strcmp(precision, "fp32") ? 1 : 2);
    const char *extra = getenv("LATBENCH_GPU_OPTIONS"); /* extra TOML lines, for experiments */
    if (extra && *extra) {
        size_t l = strlen(g->toml);
        snprintf(g->toml + l, sizeof g->toml - l, "%s\n", extra);
    }
    if (probe_vulkan(g, err, errlen) != 0) goto fail;
    g->kernels = kernels;
    if (kernels && enable_layer(g, err, errlen) != 0) goto fail;
    cs_init(&g->cs, SYNC_K, SYNC_SIGMA_FLOOR_NS, SYNC_MIN_SPAN_NS);

    char acc[PATH_MAX + 64];
    snprintf(acc, sizeof acc, "%s", litert_lib_path);
    char *slash = strrchr(acc, '/');
    snprintf(slash ? slash + 1 : acc, 64, "libLiteRtWebGpuAccelerator.so");
    if (!dlopen(acc, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(err, errlen, "cannot load the GPU accelerator %s: %s", acc, dlerror());
        goto fail;
    }
    return g;
fail:
    free(g);
    return NULL;
}

const char *gpu_options_toml(const gpu_state *g) { return g->toml; }

/* ------------------------------------------------------------------ records */
static const char *kind_name(uint32_t k) {
    switch (k) {
        case LBVK_DISPATCH: return "dispatch";
        case LBVK_DISPATCH_INDIRECT: return "dispatch_indirect";
        case LBVK_COPY: return "copy";
        default: return "injected";
    }
}

/* The kernel's display name: which shader (entry point, workgroup size, SPIR-V hash).
 * The kind of computation (Winograd transform, matmul, direct conv, ...) is assigned
 * later from the shader's identity (pipelines/gpu/programs.py), which this name carries. */
static char *kernel_label(const lbvk_record *r) {
    char *s = NULL;
    if (r->kind == LBVK_COPY) {
        if (asprintf(&s, "copy") < 0) abort();
    } else if (asprintf(&s, "%s %ux%ux%u #%08" PRIx32, r->entry[0] ? r->entry : "?", r->local_size[0],
                        r->local_size[1], r->local_size[2], (uint32_t)(r->shader_hash >> 32)) < 0) {
        abort();
    }
    return s;
}

static void push_kernel(gpu_state *g, writer *w, const lbvk_record *r, int run, int order, bool inside) {
    int64_t t = plat_now_ns();
    int64_t start = cs_to_host(&g->cs, r->gpu_begin_ns), end = cs_to_host(&g->cs, r->gpu_end_ns);
    g->sync_ns += plat_now_ns() - t;
    char *label = kernel_label(r);
    sbuf b;
    sb_init(&b);
    sb_printf(&b, "{\"type\":\"kernel\",\"run\":%d,\"order\":%d,\"name\":", run, order);
    sb_json_str(&b, label);
    sb_printf(&b,
              ",\"duration_ns\":%" PRId64 ",\"source\":\"gpu\",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
              ",\"kind\":\"%s\",\"entry\":",
              r->gpu_end_ns - r->gpu_begin_ns, start, end, kind_name(r->kind));
    sb_json_str(&b, r->entry);
    sb_printf(&b,
              ",\"shader\":\"%016" PRIx64 "\",\"shader_words\":%u,\"pipeline\":\"0x%" PRIx64
              "\",\"groups\":[%u,%u,%u],\"local_size\":[%u,%u,%u],\"submission\":%" PRIu64
              ",\"index_in_submission\":%u,\"gpu_begin_ns\":%" PRId64 ",\"gpu_end_ns\":%" PRId64
              ",\"cpu_submit_ns\":%" PRId64 ",\"gpu_submit_ns\":%" PRId64 ",\"in_run\":%s"
              ",\"sync_a\":%.12g,\"sync_b_ns\":%.1f}",
              r->shader_hash, r->shader_words, r->pipeline, r->groups[0], r->groups[1], r->groups[2],
              r->local_size[0], r->local_size[1], r->local_size[2], r->submission, r->index, r->gpu_begin_ns,
              r->gpu_end_ns, r->cpu_submit_ns, r->gpu_submit_ns, inside ? "true" : "false", g->cs.a, g->cs.b);
    record rec = record_make(REC_GPU_KERNEL, run, start, end - start);
    rec.order = order;
    rec.name = sb_take(&b);
    rec.label = label;
    writer_push(w, &rec);
}

/* Feeds one command buffer's enqueue pair to the sync (once per submission). A command
 * buffer submitted while the GPU was still busy with earlier work starts when that work
 * ends, not when it was enqueued: its pair says nothing about the clocks and is skipped
 * (nnPerf's OpenCL queued timestamp has no such wait; Vulkan has no queued timestamp). */
static void observe(gpu_state *g, const lbvk_record *r, uint64_t *last_submission) {
    if (*last_submission == r->submission + 1) return; /* seen */
    *last_submission = r->submission + 1;
    int64_t t = plat_now_ns();
    bool busy = g->last_gpu_end_ns && cs_to_host(&g->cs, g->last_gpu_end_ns) >= r->cpu_submit_ns;
    if (busy) g->pairs_busy++;
    else cs_observe(&g->cs, r->cpu_submit_ns, r->gpu_submit_ns);
    g->sync_ns += plat_now_ns() - t;
    g->syncs++;
}

int gpu_bootstrap(gpu_state *g, int n) {
    if (!g->kernels || g->bootstrap_pairs) return g->bootstrap_pairs;
    if (n <= 0) n = INJECT_N;
    /* whatever the compilation submitted comes first: drain it (its pairs feed nothing yet) */
    while (g->api->collect(g->buf, g->cap) == g->cap) {
    }
    int got = g->api->inject(n);
    if (got <= 0) return 0;
    int64_t t[64], tau[64];
    int m = 0, k;
    while ((k = g->api->collect(g->buf, g->cap)) > 0) {
        for (int i = 0; i < k; i++)
            if (g->buf[i].kind == LBVK_INJECTED && m < 64) {
                t[m] = g->buf[i].cpu_submit_ns;
                tau[m] = g->buf[i].gpu_submit_ns;
                m++;
            }
        if (k < g->cap) break;
    }
    g->injected_seen += m;
    if (m <= 0) return 0;
    int64_t t0 = plat_now_ns();
    g->sigma0 = cs_bootstrap(&g->cs, t, tau, m);
    g->sync_ns += plat_now_ns() - t0;
    g->bootstrap_pairs = m;
    g->layer_self_ns_at_start = g->api->self_time_ns();
    g->intercepts_at_start = g->api->intercepts();
    return m;
}

void gpu_after_run(gpu_state *g, writer *w, int run, int64_t t0, int64_t t1) {
    if (!g->kernels) return;
    if (!g->bootstrap_pairs) gpu_bootstrap(g, INJECT_N);
    uint64_t last = 0;
    int order = 0, k;
    while ((k = g->api->collect(g->buf, g->cap)) > 0) {
        for (int i = 0; i < k; i++) {
            const lbvk_record *r = &g->buf[i];
            if (r->kind == LBVK_INJECTED) continue;
            g->commands_seen++;
            observe(g, r, &last);
            if (r->gpu_end_ns > g->last_gpu_end_ns) g->last_gpu_end_ns = r->gpu_end_ns;
            if (run < 0) continue;
            bool inside = r->cpu_submit_ns >= t0 && r->cpu_submit_ns <= t1;
            if (!inside) g->kernels_outside_run++;
            push_kernel(g, w, r, run, order++, inside);
            g->kernels_recorded++;
        }
        if (k < g->cap) break;
    }
}

void gpu_meta_json(const gpu_state *g, sbuf *m) {
    sb_puts(m, ",\"gpu\":{\"api\":\"webgpu/vulkan\",\"device\":");
    sb_json_str(m, g->device);
    sb_puts(m, ",\"device_type\":");
    sb_json_str(m, g->device_type);
    sb_printf(m, ",\"vulkan_devices\":%d,\"vulkan_api\":\"%u.%u.%u\",\"driver_version\":%u,\"precision\":\"%s\","
                 "\"options\":",
              g->n_devices, g->vk_api >> 22, (g->vk_api >> 12) & 0x3ff, g->vk_api & 0xfff, g->vk_driver, g->precision);
    sb_json_str(m, g->toml);
    sb_printf(m, ",\"kernel_timing\":%s", g->kernels ? "true" : "false");
    if (g->kernels) {
        sb_puts(m, ",\"layer\":\"" LBVK_LAYER_NAME "\",\"layer_dir\":");
        sb_json_str(m, g->layer_dir);
        sb_printf(m, ",\"layer_active\":%s,\"timestamp_period_ns\":%.6g,\"timestamp_valid_bits\":%d,"
                     "\"sync\":{\"method\":\"nnPerf Algorithm 1\",\"k\":%d,\"sigma_floor_ns\":%.0f,"
                     "\"min_span_ns\":%.0f,\"history_ns\":%.0f,\"envelope_ns\":%.0f,\"injected\":%d,"
                     "\"sigma0_ns\":%.1f,\"a\":%.12g,\"b_ns\":%.1f}",
                  g->api->active() ? "true" : "false", g->api->timestamp_period_ns(), g->api->timestamp_valid_bits(),
                  SYNC_K, SYNC_SIGMA_FLOOR_NS, SYNC_MIN_SPAN_NS, g->cs.history_ns, g->cs.bin_ns, g->bootstrap_pairs,
                  g->sigma0, g->cs.a, g->cs.b);
    }
    sb_puts(m, "}");
}

void gpu_end_json(const gpu_state *g, sbuf *m) {
    if (!g->kernels) return;
    int64_t self = g->api->self_time_ns() - g->layer_self_ns_at_start;
    uint64_t n = g->api->intercepts() - g->intercepts_at_start;
    sb_printf(m,
              "\"gpu\":{\"kernels_recorded\":%" PRId64 ",\"commands_seen\":%" PRId64 ",\"kernels_outside_run\":%" PRId64
              ",\"dropped\":%" PRIu64 ",\"layer_self_ns\":%" PRId64 ",\"layer_intercepts\":%" PRIu64
              ",\"layer_ns_per_intercept\":%.1f,\"sync_ns\":%" PRId64 ",\"syncs\":%" PRId64
              ",\"sync_ns_per_kernel\":%.1f,\"sync\":{\"busy_skipped\":%" PRId64 ",\"observed\":%" PRId64 ",\"accepted\":%" PRId64
              ",\"rejected\":%" PRId64 ",\"refits\":%" PRId64 ",\"sigma_ns\":%.1f,\"a\":%.12g,\"b_ns\":%.1f}},",
              g->kernels_recorded, g->commands_seen, g->kernels_outside_run, g->api->dropped(), self, n,
              n ? (double)self / (double)n : 0.0, g->sync_ns, g->syncs,
              g->commands_seen ? (double)g->sync_ns / (double)g->commands_seen : 0.0, g->pairs_busy, g->cs.observed, g->cs.accepted,
              g->cs.rejected, g->cs.refits, g->cs.sigma, g->cs.a, g->cs.b);
}
