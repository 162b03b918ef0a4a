/* VK_LAYER_LATBENCH_timestamps: per-dispatch GPU timestamps and kernel identity.
 *
 * A Vulkan layer (loader interface version 2) that sits between an application (here
 * LiteRT's WebGPU accelerator, i.e. Dawn) and the driver, and changes nothing the
 * application sees except the added timestamp queries:
 *   - vkCreateShaderModule: hashes the SPIR-V and reads its entry point and workgroup size;
 *   - vkCreateComputePipelines: remembers which shader each pipeline runs;
 *   - vkBeginCommandBuffer: writes a first timestamp (the command buffer's GPU start, tau_qu);
 *   - vkCmdBindPipeline: remembers the bound compute pipeline;
 *   - vkCmdDispatch*, vkCmdCopy*: a timestamp before (TOP_OF_PIPE) and after
 *     (BOTTOM_OF_PIPE) the command, each pair from a ring of queries in one query pool;
 *   - vkQueueSubmit(2): reads CLOCK_MONOTONIC just before passing the submit down (t_qu)
 *     and queues the command buffers' commands as pending records;
 *   - the lbvk_api (lbvk.h) lets latbench-run collect finished records (query results
 *     read with VK_QUERY_RESULT_WAIT_BIT, outside any timed region) and inject empty
 *     command buffers for the clock-sync bootstrap.
 * On lavapipe the commands of a queue run one after another, so the two timestamps of a
 * dispatch bracket exactly its execution; on a real GPU, TOP_OF_PIPE may be written before
 * earlier work drains unless the application put a barrier in between (Dawn does between
 * dependent dispatches).
 *
 * One mutex guards all state: interceptions are short (a hash lookup and an append), and
 * Dawn records and submits from one thread at a time.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "lbvk.h"

#define EXPORT __attribute__((visibility("default")))
#define QUERY_COUNT 65536u /* queries in the ring; a dispatch takes two */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *dispatch_key(const void *handle) { return *(void *const *)handle; }

/* ------------------------------------------------------------------ u64 -> pointer map */
typedef struct {
    uint64_t *keys;
    void **vals;
    size_t cap, n;
} map_t;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static void **map_slot(map_t *m, uint64_t key, bool create) {
    if (create && (m->n + 1) * 2 > m->cap) {
        map_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 256;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) abort();
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) *map_slot(&g, m->keys[i], true) = m->vals[i];
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    if (!m->cap) return NULL;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return &m->vals[i];
        if (!m->keys[i]) {
            if (!create) return NULL;
            m->keys[i] = key;
            m->n++;
            return &m->vals[i];
        }
    }
}

static void *map_get(map_t *m, uint64_t key) {
    void **s = map_slot(m, key, false);
    return s ? *s : NULL;
}

/* ------------------------------------------------------------------ state */
typedef struct {
    uint64_t hash;
    uint32_t words;
    uint32_t local_size[3];
    char entry[32];
} shader_info;

typedef struct {
    void *key;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties GetPhysicalDeviceQueueFamilyProperties;
} instance_t;

typedef struct {
    void *key;
    VkDevice device;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkSetDeviceLoaderData set_loader_data;
    PFN_vkDestroyDevice DestroyDevice;
    PFN_vkCreateQueryPool CreateQueryPool;
    PFN_vkDestroyQueryPool DestroyQueryPool;
    PFN_vkGetQueryPoolResults GetQueryPoolResults;
    PFN_vkCmdResetQueryPool CmdResetQueryPool;
    PFN_vkCmdWriteTimestamp CmdWriteTimestamp;
    PFN_vkBeginCommandBuffer BeginCommandBuffer;
    PFN_vkEndCommandBuffer EndCommandBuffer;
    PFN_vkQueueSubmit QueueSubmit;
    PFN_vkQueueSubmit2 QueueSubmit2;
    PFN_vkCmdBindPipeline CmdBindPipeline;
    PFN_vkCmdDispatch CmdDispatch;
    PFN_vkCmdDispatchBase CmdDispatchBase;
    PFN_vkCmdDispatchIndirect CmdDispatchIndirect;
    PFN_vkCmdCopyBuffer CmdCopyBuffer;
    PFN_vkCmdCopyBufferToImage CmdCopyBufferToImage;
    PFN_vkCmdCopyImageToBuffer CmdCopyImageToBuffer;
    PFN_vkCreateShaderModule CreateShaderModule;
    PFN_vkCreateComputePipelines CreateComputePipelines;
    PFN_vkCreateCommandPool CreateCommandPool;
    PFN_vkDestroyCommandPool DestroyCommandPool;
    PFN_vkAllocateCommandBuffers AllocateCommandBuffers;
    PFN_vkCreateFence CreateFence;
    PFN_vkDestroyFence DestroyFence;
    PFN_vkWaitForFences WaitForFences;
    VkQueryPool pool;
    uint64_t pairs_allocated; /* query pairs handed out so far (ring position) */
    double period_ns;
    int valid_bits;
    uint32_t queue_family;
    VkQueue last_queue;
    char name[256];
} device_t;

typedef struct {
    uint32_t kind;
    uint32_t index;
    uint64_t pair; /* serial of the query pair */
    uint64_t pipeline;
    shader_info shader;
    uint32_t groups[3];
} cmd_t;

typedef struct {
    device_t *dev;
    uint64_t begin_pair; /* UINT64_MAX: no start timestamp */
    uint64_t bound_pipeline;
    cmd_t *cmds;
    uint32_t n, cap;
} cb_t;

typedef struct {
    device_t *dev;
    uint64_t submission;
    uint64_t begin_pair;
    int64_t cpu_submit_ns, submit_cost_ns;
    cmd_t *cmds;
    uint32_t n, next; /* commands, and the next one collect() hands out */
    bool injected, resolved;
    int64_t gpu_submit_ns;
} pending_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static instance_t g_inst[8];
static int g_ninst;
static device_t *g_dev[8];
static int g_ndev;
static map_t g_shaders, g_pipelines, g_cbs;
static pending_t *g_pending;
static size_t g_npending, g_cappending, g_pending_head;
static uint64_t g_submissions, g_dropped, g_intercepts;
static int64_t g_self_ns;

static instance_t *find_instance(void *key) {
    for (int i = 0; i < g_ninst; i++)
        if (g_inst[i].key == key) return &g_inst[i];
    return NULL;
}

static device_t *find_device(void *key) {
    for (int i = 0; i < g_ndev; i++)
        if (g_dev[i]->key == key) return g_dev[i];
    return NULL;
}

/* ------------------------------------------------------------------ SPIR-V */
/* FNV-1a over the words, the entry point name (OpEntryPoint) and the workgroup size
 * (OpExecutionMode LocalSize) of the first entry point. */
static void read_spirv(const uint32_t *code, size_t bytes, shader_info *out) {
    memset(out, 0, sizeof *out);
    size_t n = bytes / 4;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ code[i]) * 1099511628211ULL;
    out->hash = h;
    out->words = (uint32_t)n;
    if (n < 5 || code[0] != 0x07230203u) return;
    for (size_t i = 5; i < n;) {
        uint32_t wc = code[i] >> 16, op = code[i] & 0xffffu;
        if (wc == 0 || i + wc > n) break;
        if (op == 15 && wc >= 4 && !out->entry[0]) /* OpEntryPoint model id "name" ... */
            snprintf(out->entry, sizeof out->entry, "%.*s", (int)((wc - 3) * 4), (const char *)&code[i + 3]);
        else if (op == 16 && wc >= 6 && code[i + 2] == 17 && !out->local_size[0]) { /* LocalSize x y z */
            out->local_size[0] = code[i + 3];
            out->local_size[1] = code[i + 4];
            out->local_size[2] = code[i + 5];
        } else if (op == 54) /* OpFunction: past the module's header section */
            break;
        i += wc;
    }
}

/* ------------------------------------------------------------------ queries */
static uint32_t pair_query(uint64_t pair) { return (uint32_t)((pair * 2) % QUERY_COUNT); }

/* A query pair, reset and its first timestamp written at the current point of cb. */
static uint64_t begin_pair(device_t *d, VkCommandBuffer cb, VkPipelineStageFlagBits stage) {
    uint64_t pair = d->pairs_allocated++;
    uint32_t q = pair_query(pair);
    d->CmdResetQueryPool(cb, d->pool, q, 2);
    d->CmdWriteTimestamp(cb, stage, d->pool, q);
    return pair;
}

static cmd_t *add_cmd(cb_t *c, uint32_t kind) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->cmds = realloc(c->cmds, c->cap * sizeof *c->cmds);
        if (!c->cmds) abort();
    }
    cmd_t *k = &c->cmds[c->n];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->index = c->n++;
    return k;
}

/* ------------------------------------------------------------------ instance */
static VKAPI_ATTR VkResult VKAPI_CALL lb_CreateInstance(const VkInstanceCreateInfo *ci,
                                                        const VkAllocationCallbacks *alloc,
                                                        VkInstance *out) {
    VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (chain && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                      chain->function == VK_LAYER_LINK_INFO))
        chain = (VkLayerInstanceCreateInfo *)chain->pNext;
    if (!chain) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    VkResult r = create(ci, alloc, out);
    if (r != VK_SUCCESS) return r;
    pthread_mutex_lock(&g_mu);
    if (g_ninst < 8) {
        instance_t *in = &g_inst[g_ninst++];
        in->key = dispatch_key(*out);
        in->gipa = gipa;
        in->DestroyInstance = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
        in->GetPhysicalDeviceProperties =
            (PFN_vkGetPhysicalDeviceProperties)gipa(*out, "vkGetPhysicalDeviceProperties");
        in->GetPhysicalDeviceQueueFamilyProperties = (PFN_vkGetPhysicalDeviceQueueFamilyProperties)gipa(
            *out, "vkGetPhysicalDeviceQueueFamilyProperties");
    }
    pthread_mutex_unlock(&g_mu);
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL lb_DestroyInstance(VkInstance inst, const VkAllocationCallbacks *alloc) {
    pthread_mutex_lock(&g_mu);
    instance_t *in = find_instance(dispatch_key(inst));
    PFN_vkDestroyInstance destroy = in ? in->DestroyInstance : NULL;
    if (in) *in = g_inst[--g_ninst];
    pthread_mutex_unlock(&g_mu);
    if (destroy) destroy(inst, alloc);
}

/* ------------------------------------------------------------------ device */
#define LOAD(d, name) (d)->name = (PFN_vk##name)(d)->gdpa((d)->device, "vk" #name)

static VKAPI_ATTR VkResult VKAPI_CALL lb_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                                      const VkAllocationCallbacks *alloc, VkDevice *out) {
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)ci->pNext, *cb = link;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    while (cb && !(cb->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && cb->function == VK_LOADER_DATA_CALLBACK))
        cb = (VkLayerDeviceCreateInfo *)cb->pNext;
    if (!link) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(VK_NULL_HANDLE, "vkCreateDevice");
    VkResult r = create(pd, ci, alloc, out);
    if (r != VK_SUCCESS) return r;

    device_t *d = calloc(1, sizeof *d);
    if (!d) abort();
    d->key = dispatch_key(*out);
    d->device = *out;
    d->gdpa = gdpa;
    d->set_loader_data = cb ? cb->u.pfnSetDeviceLoaderData : NULL;
    LOAD(d, DestroyDevice);
    LOAD(d, CreateQueryPool);
    LOAD(d, DestroyQueryPool);
    LOAD(d, GetQueryPoolResults);
    LOAD(d, CmdResetQueryPool);
    LOAD(d, CmdWriteTimestamp);
    LOAD(d, BeginCommandBuffer);
    LOAD(d, EndCommandBuffer);
    LOAD(d, QueueSubmit);
    LOAD(d, QueueSubmit2);
    LOAD(d, CmdBindPipeline);
    LOAD(d, CmdDispatch);
    LOAD(d, CmdDispatchBase);
    LOAD(d, CmdDispatchIndirect);
    LOAD(d, CmdCopyBuffer);
    LOAD(d, CmdCopyBufferToImage);
    LOAD(d, CmdCopyImageToBuffer);
    LOAD(d, CreateShaderModule);
    LOAD(d, CreateComputePipelines);
    LOAD(d, CreateCommandPool);
    LOAD(d, DestroyCommandPool);
    LOAD(d, AllocateCommandBuffers);
    LOAD(d, CreateFence);
    LOAD(d, DestroyFence);
    LOAD(d, WaitForFences);
    d->queue_family = ci->queueCreateInfoCount ? ci->pQueueCreateInfos[0].queueFamilyIndex : 0;

    pthread_mutex_lock(&g_mu);
    instance_t *in = find_instance(dispatch_key(pd));
    if (in) {
        VkPhysicalDeviceProperties props;
        in->GetPhysicalDeviceProperties(pd, &props);
        d->period_ns = props.limits.timestampPeriod;
        snprintf(d->name, sizeof d->name, "%s", props.deviceName);
        uint32_t nq = 0;
        in->GetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
        VkQueueFamilyProperties qf[16];
        if (nq > 16) nq = 16;
        in->GetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
        if (d->queue_family < nq) d->valid_bits = (int)qf[d->queue_family].timestampValidBits;
    }
    VkQueryPoolCreateInfo qi = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, NULL, 0, VK_QUERY_TYPE_TIMESTAMP,
                                QUERY_COUNT, 0};
    if (d->valid_bits <= 0 || d->CreateQueryPool(*out, &qi, NULL, &d->pool) != VK_SUCCESS) {
        /* no timestamps on this queue: pass everything through, unmeasured */
        fprintf(stderr, "%s: device %s has no usable timestamps; not measuring it\n", LBVK_LAYER_NAME, d->name);
        d->pool = VK_NULL_HANDLE;
    }
    if (g_ndev < 8) g_dev[g_ndev++] = d;
    pthread_mutex_unlock(&g_mu);
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL lb_DestroyDevice(VkDevice dev, const VkAllocationCallbacks *alloc) {
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(dev));
    for (int i = 0; d && i < g_ndev; i++)
        if (g_dev[i] == d) g_dev[i] = g_dev[--g_ndev];
    /* forget pending records of this device: their queries die with it */
    for (size_t i = g_pending_head; d && i < g_npending; i++)
        if (g_pending[i].dev == d) g_pending[i].dev = NULL;
    pthread_mutex_unlock(&g_mu);
    if (!d) return;
    if (d->pool) d->DestroyQueryPool(dev, d->pool, NULL);
    d->DestroyDevice(dev, alloc);
    free(d);
}

/* ------------------------------------------------------------------ shaders, pipelines */
static VKAPI_ATTR VkResult VKAPI_CALL lb_CreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *ci,
                                                            const VkAllocationCallbacks *alloc, VkShaderModule *out) {
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(dev));
    pthread_mutex_unlock(&g_mu);
    VkResult r = d->CreateShaderModule(dev, ci, alloc, out);
    if (r != VK_SUCCESS) return r;
    shader_info *s = malloc(sizeof *s);
    if (!s) abort();
    read_spirv(ci->pCode, ci->codeSize, s);
    /* LATBENCH_VKLAYER_DUMP_DIR: keep every shader as <hash>.spv (to identify kernels offline) */
    const char *dump = getenv("LATBENCH_VKLAYER_DUMP_DIR");
    if (dump && *dump) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%016llx.spv", dump, (unsigned long long)s->hash);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(ci->pCode, 1, ci->codeSize, f);
            fclose(f);
        }
    }
    pthread_mutex_lock(&g_mu);
    void **slot = map_slot(&g_shaders, (uint64_t)*out, true);
    free(*slot);
    *slot = s;
    pthread_mutex_unlock(&g_mu);
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL lb_CreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                                const VkComputePipelineCreateInfo *ci,
                                                                const VkAllocationCallbacks *alloc, VkPipeline *out) {
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(dev));
    pthread_mutex_unlock(&g_mu);
    VkResult r = d->CreateComputePipelines(dev, cache, n, ci, alloc, out);
    pthread_mutex_lock(&g_mu);
    for (uint32_t i = 0; i < n; i++) {
        if (!out[i]) continue;
        shader_info *s = calloc(1, sizeof *s);
        if (!s) abort();
        shader_info *m = map_get(&g_shaders, (uint64_t)ci[i].stage.module);
        if (m) *s = *m;
        if (ci[i].stage.pName) snprintf(s->entry, sizeof s->entry, "%s", ci[i].stage.pName);
        void **slot = map_slot(&g_pipelines, (uint64_t)out[i], true);
        free(*slot);
        *slot = s;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ------------------------------------------------------------------ command buffers */
static cb_t *cb_state(VkCommandBuffer cb, bool create) {
    void **slot = map_slot(&g_cbs, (uint64_t)(uintptr_t)cb, create);
    if (!slot) return NULL;
    if (!*slot) {
        *slot = calloc(1, sizeof(cb_t));
        if (!*slot) abort();
    }
    return *slot;
}

static VKAPI_ATTR VkResult VKAPI_CALL lb_BeginCommandBuffer(VkCommandBuffer cb, const VkCommandBufferBeginInfo *bi) {
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(cb));
    pthread_mutex_unlock(&g_mu);
    VkResult r = d->BeginCommandBuffer(cb, bi);
    if (r != VK_SUCCESS) return r;
    int64_t t = now_ns();
    pthread_mutex_lock(&g_mu);
    cb_t *c = cb_state(cb, true);
    c->dev = d;
    c->n = 0;
    c->bound_pipeline = 0;
    c->begin_pair = UINT64_MAX;
    if (d->pool) c->begin_pair = begin_pair(d, cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
    g_intercepts++;
    g_self_ns += now_ns() - t;
    pthread_mutex_unlock(&g_mu);
    return r;
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdBindPipeline(VkCommandBuffer cb, VkPipelineBindPoint bp, VkPipeline p) {
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(cb));
    if (bp == VK_PIPELINE_BIND_POINT_COMPUTE) {
        cb_t *c = cb_state(cb, false);
        if (c) c->bound_pipeline = (uint64_t)p;
    }
    pthread_mutex_unlock(&g_mu);
    d->CmdBindPipeline(cb, bp, p);
}

/* Opens a measured command: returns the device (NULL when not measuring) and the pair. */
static device_t *cmd_open(VkCommandBuffer cb, uint32_t kind, const uint32_t groups[3], uint64_t *pair,
                          device_t **dev) {
    int64_t t = now_ns();
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(cb));
    *dev = d;
    cb_t *c = cb_state(cb, false);
    if (!d || !d->pool || !c || c->dev != d) {
        pthread_mutex_unlock(&g_mu);
        return NULL;
    }
    cmd_t *k = add_cmd(c, kind);
    k->pipeline = kind == LBVK_COPY ? 0 : c->bound_pipeline;
    if (k->pipeline) {
        shader_info *s = map_get(&g_pipelines, k->pipeline);
        if (s) k->shader = *s;
    }
    if (groups) memcpy(k->groups, groups, sizeof k->groups);
    k->pair = *pair = begin_pair(d, cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
    g_intercepts++;
    g_self_ns += now_ns() - t;
    pthread_mutex_unlock(&g_mu);
    return d;
}

static void cmd_close(device_t *d, VkCommandBuffer cb, uint64_t pair) {
    int64_t t = now_ns();
    d->CmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->pool, pair_query(pair) + 1);
    int64_t dt = now_ns() - t;
    pthread_mutex_lock(&g_mu);
    g_self_ns += dt;
    pthread_mutex_unlock(&g_mu);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdDispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) {
    uint32_t g[3] = {x, y, z};
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_DISPATCH, g, &pair, &dev);
    dev->CmdDispatch(cb, x, y, z);
    if (d) cmd_close(d, cb, pair);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdDispatchBase(VkCommandBuffer cb, uint32_t bx, uint32_t by, uint32_t bz,
                                                     uint32_t x, uint32_t y, uint32_t z) {
    uint32_t g[3] = {x, y, z};
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_DISPATCH, g, &pair, &dev);
    dev->CmdDispatchBase(cb, bx, by, bz, x, y, z);
    if (d) cmd_close(d, cb, pair);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdDispatchIndirect(VkCommandBuffer cb, VkBuffer buf, VkDeviceSize off) {
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_DISPATCH_INDIRECT, NULL, &pair, &dev);
    dev->CmdDispatchIndirect(cb, buf, off);
    if (d) cmd_close(d, cb, pair);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdCopyBuffer(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n,
                                                   const VkBufferCopy *regions) {
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_COPY, NULL, &pair, &dev);
    dev->CmdCopyBuffer(cb, src, dst, n, regions);
    if (d) cmd_close(d, cb, pair);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdCopyBufferToImage(VkCommandBuffer cb, VkBuffer src, VkImage dst,
                                                          VkImageLayout layout, uint32_t n,
                                                          const VkBufferImageCopy *regions) {
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_COPY, NULL, &pair, &dev);
    dev->CmdCopyBufferToImage(cb, src, dst, layout, n, regions);
    if (d) cmd_close(d, cb, pair);
}

static VKAPI_ATTR void VKAPI_CALL lb_CmdCopyImageToBuffer(VkCommandBuffer cb, VkImage src, VkImageLayout layout,
                                                          VkBuffer dst, uint32_t n, const VkBufferImageCopy *regions) {
    uint64_t pair;
    device_t *dev;
    device_t *d = cmd_open(cb, LBVK_COPY, NULL, &pair, &dev);
    dev->CmdCopyImageToBuffer(cb, src, layout, dst, n, regions);
    if (d) cmd_close(d, cb, pair);
}

/* ------------------------------------------------------------------ submission */
static void push_pending(pending_t p) {
    if (g_npending == g_cappending) {
        /* compact what collect() already consumed before growing */
        if (g_pending_head) {
            memmove(g_pending, g_pending + g_pending_head, (g_npending - g_pending_head) * sizeof *g_pending);
            g_npending -= g_pending_head;
            g_pending_head = 0;
        }
        if (g_npending == g_cappending) {
            g_cappending = g_cappending ? g_cappending * 2 : 256;
            g_pending = realloc(g_pending, g_cappending * sizeof *g_pending);
            if (!g_pending) abort();
        }
    }
    g_pending[g_npending++] = p;
}

/* Snapshots the command buffers of a submit as pending records (under the lock). */
static void queue_buffers(device_t *d, const VkCommandBuffer *cbs, uint32_t n, int64_t t_submit) {
    for (uint32_t i = 0; i < n; i++) {
        cb_t *c = cb_state(cbs[i], false);
        if (!c || c->dev != d || c->begin_pair == UINT64_MAX) continue;
        pending_t p = {0};
        p.dev = d;
        p.submission = g_submissions++;
        p.begin_pair = c->begin_pair;
        p.cpu_submit_ns = t_submit;
        p.n = c->n;
        if (c->n) {
            p.cmds = malloc(c->n * sizeof *p.cmds);
            if (!p.cmds) abort();
            memcpy(p.cmds, c->cmds, c->n * sizeof *p.cmds);
        }
        push_pending(p);
    }
}

/* After the submit went down: the snapshots still without a time are this submit's. */
static void stamp_submitted(int64_t t_submit, int64_t cost) {
    for (size_t i = g_pending_head; i < g_npending; i++)
        if (g_pending[i].cpu_submit_ns == 0 && !g_pending[i].injected) {
            g_pending[i].cpu_submit_ns = t_submit;
            g_pending[i].submit_cost_ns = cost;
        }
}

/* Ends a submit's interception, entered at t with the lock held: counts it, reads t_qu
 * (returned) as the last thing before the submit goes down, and releases the lock. */
static inline int64_t submit_release(int64_t t) {
    g_intercepts++;
    int64_t t_submit = now_ns();
    g_self_ns += t_submit - t;
    pthread_mutex_unlock(&g_mu);
    return t_submit;
}

/* Right after the driver's submit returned: its cost, and t_qu on this submit's snapshots. */
static inline void submit_returned(int64_t t_submit) {
    int64_t cost = now_ns() - t_submit;
    pthread_mutex_lock(&g_mu);
    stamp_submitted(t_submit, cost);
    pthread_mutex_unlock(&g_mu);
}

static VKAPI_ATTR VkResult VKAPI_CALL lb_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence fence) {
    int64_t t = now_ns();
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(q));
    if (d && d->pool) {
        d->last_queue = q;
        for (uint32_t s = 0; s < n; s++) queue_buffers(d, si[s].pCommandBuffers, si[s].commandBufferCount, 0);
    }
    int64_t t_submit = submit_release(t);
    VkResult r = d->QueueSubmit(q, n, si, fence);
    submit_returned(t_submit);
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL lb_QueueSubmit2(VkQueue q, uint32_t n, const VkSubmitInfo2 *si, VkFence fence) {
    int64_t t = now_ns();
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(q));
    if (d && d->pool) {
        d->last_queue = q;
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t k = 0; k < si[s].commandBufferInfoCount; k++)
                queue_buffers(d, &si[s].pCommandBufferInfos[k].commandBuffer, 1, 0);
    }
    int64_t t_submit = submit_release(t);
    VkResult r = d->QueueSubmit2(q, n, si, fence);
    submit_returned(t_submit);
    return r;
}

/* ------------------------------------------------------------------ dispatch tables */
static PFN_vkVoidFunction device_proc(const char *name);

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL lb_GetDeviceProcAddr(VkDevice dev, const char *name) {
    PFN_vkVoidFunction f = device_proc(name);
    if (f) return f;
    pthread_mutex_lock(&g_mu);
    device_t *d = find_device(dispatch_key(dev));
    pthread_mutex_unlock(&g_mu);
    return d ? d->gdpa(dev, name) : NULL;
}

static PFN_vkVoidFunction device_proc(const char *name) {
#define F(n) \
    if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)lb_##n;
    F(GetDeviceProcAddr)
    F(DestroyDevice)
    F(CreateShaderModule)
    F(CreateComputePipelines)
    F(BeginCommandBuffer)
    F(CmdBindPipeline)
    F(CmdDispatch)
    F(CmdDispatchBase)
    F(CmdDispatchIndirect)
    F(CmdCopyBuffer)
    F(CmdCopyBufferToImage)
    F(CmdCopyImageToBuffer)
    F(QueueSubmit)
    F(QueueSubmit2)
    if (!strcmp(name, "vkCmdDispatchBaseKHR")) return (PFN_vkVoidFunction)lb_CmdDispatchBase;
    if (!strcmp(name, "vkQueueSubmit2KHR")) return (PFN_vkVoidFunction)lb_QueueSubmit2;
#undef F
    return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL lb_GetInstanceProcAddr(VkInstance inst, const char *name) {
    if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)lb_GetInstanceProcAddr;
    if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)lb_CreateInstance;
    if (!strcmp(name, "vkDestroyInstance")) return (PFN_vkVoidFunction)lb_DestroyInstance;
    if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)lb_CreateDevice;
    PFN_vkVoidFunction f = device_proc(name);
    if (f) return f;
    if (!inst) return NULL;
    pthread_mutex_lock(&g_mu);
    instance_t *in = find_instance(dispatch_key(inst));
    pthread_mutex_unlock(&g_mu);
    return in ? in->gipa(inst, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion >= 2) {
        v->pfnGetInstanceProcAddr = lb_GetInstanceProcAddr;
        v->pfnGetDeviceProcAddr = lb_GetDeviceProcAddr;
        v->pfnGetPhysicalDeviceProcAddr = NULL;
        v->loaderLayerInterfaceVersion = 2;
    }
    return VK_SUCCESS;
}

/* ------------------------------------------------------------------ the lbvk_api */
static device_t *main_device(void) { return g_ndev ? g_dev[0] : NULL; }

static int api_active(void) {
    pthread_mutex_lock(&g_mu);
    device_t *d = main_device();
    int on = d && d->pool;
    pthread_mutex_unlock(&g_mu);
    return on;
}

static const char *api_device_name(void) {
    device_t *d = main_device();
    return d ? d->name : "";
}

static double api_period(void) {
    device_t *d = main_device();
    return d ? d->period_ns : 0;
}

static int api_valid_bits(void) {
    device_t *d = main_device();
    return d ? d->valid_bits : 0;
}

static int api_inject(int n) {
    pthread_mutex_lock(&g_mu);
    device_t *d = main_device();
    VkQueue q = d ? d->last_queue : VK_NULL_HANDLE;
    pthread_mutex_unlock(&g_mu);
    if (!d || !d->pool || !q || n <= 0) return 0;
    VkCommandPoolCreateInfo pi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, d->queue_family};
    VkCommandPool pool;
    if (d->CreateCommandPool(d->device, &pi, NULL, &pool) != VK_SUCCESS) return 0;
    VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0};
    int done = 0;
    for (int i = 0; i < n; i++) {
        VkCommandBuffer cb;
        VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool,
                                          VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
        if (d->AllocateCommandBuffers(d->device, &ai, &cb) != VK_SUCCESS) break;
        /* a dispatchable object created below the loader needs the loader's dispatch pointer */
        if (d->set_loader_data) d->set_loader_data(d->device, cb);
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                       VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
        d->BeginCommandBuffer(cb, &bi);
        pthread_mutex_lock(&g_mu);
        uint64_t pair = begin_pair(d, cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
        pthread_mutex_unlock(&g_mu);
        d->EndCommandBuffer(cb);
        VkFence fence;
        if (d->CreateFence(d->device, &fi, NULL, &fence) != VK_SUCCESS) break;
        VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cb, 0, NULL};
        int64_t t = now_ns();
        VkResult r = d->QueueSubmit(q, 1, &si, fence);
        int64_t cost = now_ns() - t;
        if (r == VK_SUCCESS) d->WaitForFences(d->device, 1, &fence, VK_TRUE, UINT64_MAX);
        d->DestroyFence(d->device, fence, NULL);
        if (r != VK_SUCCESS) break;
        pending_t p = {0};
        p.dev = d;
        p.begin_pair = pair;
        p.cpu_submit_ns = t;
        p.submit_cost_ns = cost;
        p.injected = true;
        pthread_mutex_lock(&g_mu);
        p.submission = g_submissions++;
        push_pending(p);
        pthread_mutex_unlock(&g_mu);
        done++;
    }
    d->DestroyCommandPool(d->device, pool, NULL); /* frees its command buffers */
    return done;
}

static int64_t ticks_ns(const device_t *d, uint64_t ticks) {
    if (d->valid_bits > 0 && d->valid_bits < 64) ticks &= (1ULL << d->valid_bits) - 1;
    return (int64_t)((double)ticks * d->period_ns);
}

static bool read_pair(device_t *d, uint64_t pair, uint32_t count, uint64_t out[2]) {
    if (d->pairs_allocated - pair > QUERY_COUNT / 2) return false; /* overwritten by the ring */
    return d->GetQueryPoolResults(d->device, d->pool, pair_query(pair), count, count * sizeof(uint64_t), out,
                                  sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS;
}

static int api_collect(lbvk_record *out, int max) {
    int got = 0;
    pthread_mutex_lock(&g_mu);
    while (g_pending_head < g_npending && got < max) {
        pending_t *p = &g_pending[g_pending_head];
        if (p->cpu_submit_ns == 0 && !p->injected) break; /* its submit is still going down */
        bool ok = p->dev != NULL;
        if (ok && !p->resolved) {
            uint64_t begin[2] = {0, 0};
            ok = read_pair(p->dev, p->begin_pair, 1, begin);
            if (ok) {
                p->gpu_submit_ns = ticks_ns(p->dev, begin[0]);
                p->resolved = true;
                if (p->injected) {
                    lbvk_record *r = &out[got++];
                    memset(r, 0, sizeof *r);
                    r->submission = p->submission;
                    r->kind = LBVK_INJECTED;
                    r->cpu_submit_ns = p->cpu_submit_ns;
                    r->gpu_submit_ns = r->gpu_begin_ns = r->gpu_end_ns = p->gpu_submit_ns;
                    r->cpu_submit_cost_ns = p->submit_cost_ns;
                    snprintf(r->entry, sizeof r->entry, "injected");
                }
            }
        }
        if (!ok) {
            g_dropped += p->n - p->next + (p->injected ? 1 : 0);
            p->next = p->n;
        }
        while (p->next < p->n && got < max) {
            const cmd_t *k = &p->cmds[p->next++];
            uint64_t ts[2];
            if (!read_pair(p->dev, k->pair, 2, ts)) {
                g_dropped++;
                continue;
            }
            lbvk_record *r = &out[got++];
            memset(r, 0, sizeof *r);
            r->submission = p->submission;
            r->index = k->index;
            r->kind = k->kind;
            r->pipeline = k->pipeline;
            r->shader_hash = k->shader.hash;
            r->shader_words = k->shader.words;
            memcpy(r->groups, k->groups, sizeof r->groups);
            memcpy(r->local_size, k->shader.local_size, sizeof r->local_size);
            memcpy(r->entry, k->shader.entry, sizeof r->entry);
            r->gpu_begin_ns = ticks_ns(p->dev, ts[0]);
            r->gpu_end_ns = ticks_ns(p->dev, ts[1]);
            r->cpu_submit_ns = p->cpu_submit_ns;
            r->gpu_submit_ns = p->gpu_submit_ns;
            r->cpu_submit_cost_ns = p->submit_cost_ns;
        }
        if (p->next < p->n) break; /* out is full; go on from here next time */
        free(p->cmds);
        g_pending_head++;
    }
    if (g_pending_head == g_npending) g_pending_head = g_npending = 0;
    pthread_mutex_unlock(&g_mu);
    return got;
}

static uint64_t api_dropped(void) { return g_dropped; }
static int64_t api_self_time(void) { return g_self_ns; }
static uint64_t api_intercepts(void) { return g_intercepts; }

static const lbvk_api g_api = {
    LBVK_API_VERSION, api_active, api_device_name, api_period, api_valid_bits, api_inject, api_collect,
    api_dropped,      api_self_time, api_intercepts,
};

EXPORT const lbvk_api *latbench_vklayer_api(void) { return &g_api; }
