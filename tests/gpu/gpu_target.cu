/* gpu_target.cu: a CUDA process for the GPU tests and benchmarks to checkpoint.
 *
 * It holds a chosen amount of GPU memory (cudaMalloc; cudaMallocManaged only
 * with --managed) filled with a pattern that depends on every word's index,
 * and keeps verifying the whole buffer on the GPU.  After each verification
 * it prints one line on stdout and rewrites a one-line status file
 * atomically, so that a test can tell that the data survived a checkpoint
 * and that the process runs again afterwards:
 *
 *   verify iter=N mismatches=M total_mismatches=T first_bad=I ms=X
 *          pid=P uuid=GPU-... device=D bytes=B managed=0|1 error=none
 *
 * uuid is asked of the driver again after every verification: the UUID of
 * the GPU behind the device of the current context (cuCtxGetDevice, then
 * cuDeviceGetUuid, reached through cudaGetDriverEntryPointByVersion so that
 * nothing links libcuda directly), so that a test can see the process move
 * to another GPU after a restore with a GPU mapping.  device is the CUDA
 * runtime's device ordinal, which a migration does not change.  Should the
 * driver's entry points be unavailable, the runtime's cudaGetDeviceProperties
 * answers instead.  Whether the driver reports the new physical GPU after a
 * migration is the driver's business (one public report says that
 * cuDeviceGetUuid_v2 does, while cuDeviceGetPCIBusId stays stale); tests
 * should take nvidia-smi as the authority and this field as a second
 * opinion.  "unknown" when the query failed (not a verification error).
 *
 * --ready-fd=N: once the buffer is filled and verified once, "ready ..." is
 * written to fd N and N is closed, so a parent can wait for it without
 * polling.  Exit status: 0 after --iterations with no mismatch, 1 when a
 * mismatch was seen, 2 on a CUDA or usage error.
 *
 * --children=N: before any CUDA call the process forks N children, each of
 * which becomes an ordinary target of its own (same options, --children
 * aside) with the status file STATUS.childK (K = 1..N) and the seed
 * SEED + K, so that a process tree of CUDA processes exists (a parent and N
 * children, for CRIU's tree dump).  Children do not write --ready-fd (they
 * close it).  When the parent ends, it sends SIGTERM to its children and
 * waits for them; its exit status is its own. */
#include <cuda.h> /* types only: the driver is reached through the runtime */
#include <cuda_runtime.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

volatile sig_atomic_t gpu_target_stop = 0;

void gpu_target_on_signal(int sig)
{
        (void)sig;
        gpu_target_stop = 1;
}

/* splitmix64 of the word index and the seed: every word differs, so a
 * restore that put back zeros, stale pages or pages in the wrong place is
 * caught. */
__host__ __device__ inline uint64_t gpu_target_pattern(uint64_t i, uint64_t seed)
{
        uint64_t z = i + seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

__global__ void gpu_target_fill(uint64_t *p, uint64_t n, uint64_t seed)
{
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
                p[i] = gpu_target_pattern(i, seed);
}

__global__ void gpu_target_verify(const uint64_t *p, uint64_t n, uint64_t seed,
                                  unsigned long long *mismatches,
                                  unsigned long long *first_bad)
{
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        unsigned long long bad = 0;
        unsigned long long first = ~0ULL;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
                if (p[i] != gpu_target_pattern(i, seed)) {
                        if (bad == 0)
                                first = i;
                        bad++;
                }
        }
        /* Mismatches are rare: atomics only from threads that saw one. */
        if (bad) {
                atomicAdd(mismatches, bad);
                atomicMin(first_bad, first);
        }
}

struct gpu_target_opts {
        unsigned long long mib = 1024;
        bool managed = false;
        long interval_ms = 200;
        long long iterations = -1;
        const char *status_path = nullptr;
        int ready_fd = -1;
        int device = 0;
        unsigned long long seed = 0x5eed;
        bool quiet = false;
        unsigned children = 0;
};

void gpu_target_usage(FILE *f)
{
        fprintf(f,
                "usage: cudackpt-gpu-target [--mib=N] [--managed] [--interval-ms=N]\n"
                "                           [--iterations=N] [--status=FILE] [--ready-fd=N]\n"
                "                           [--device=N] [--seed=N] [--quiet] [--children=N]\n"
                "  --mib=N          GPU memory to hold, MiB (default 1024)\n"
                "  --managed        use cudaMallocManaged instead of cudaMalloc\n"
                "  --interval-ms=N  pause between verifications (default 200)\n"
                "  --iterations=N   exit after N verifications (default: run until killed)\n"
                "  --status=FILE    rewrite FILE atomically after each verification\n"
                "  --ready-fd=N     write \"ready ...\" to fd N after the first verification\n"
                "  --device=N       the CUDA device to run on (default 0; runtime order, so\n"
                "                   CUDA_DEVICE_ORDER=PCI_BUS_ID makes it nvidia-smi's index)\n"
                "  --seed=N         seed of the pattern (default 0x5eed)\n"
                "  --quiet          no line per verification on stdout\n"
                "  --children=N     first fork N children, each a target of its own with\n"
                "                   the status file FILE.childK and the seed SEED+K (K = 1..N)\n");
}

bool gpu_target_parse_ull(const char *s, unsigned long long *ret)
{
        char *end = nullptr;
        errno = 0;
        if (*s == '-' || *s == '\0')
                return false;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno != 0 || *end != '\0')
                return false;
        *ret = v;
        return true;
}

int gpu_target_parse(int argc, char **argv, gpu_target_opts *o)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                unsigned long long v = 0;
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        gpu_target_usage(stdout);
                        exit(0);
                } else if (strcmp(a, "--managed") == 0) {
                        o->managed = true;
                } else if (strcmp(a, "--quiet") == 0) {
                        o->quiet = true;
                } else if (strncmp(a, "--mib=", 6) == 0 && gpu_target_parse_ull(a + 6, &v) && v > 0) {
                        o->mib = v;
                } else if (strncmp(a, "--interval-ms=", 14) == 0 && gpu_target_parse_ull(a + 14, &v) &&
                           v <= 3600000) {
                        o->interval_ms = (long)v;
                } else if (strncmp(a, "--iterations=", 13) == 0 && gpu_target_parse_ull(a + 13, &v) &&
                           v > 0 && v < (1ULL << 62)) {
                        o->iterations = (long long)v;
                } else if (strncmp(a, "--status=", 9) == 0 && a[9] != '\0') {
                        o->status_path = a + 9;
                } else if (strncmp(a, "--ready-fd=", 11) == 0 && gpu_target_parse_ull(a + 11, &v) &&
                           v <= 65535) {
                        o->ready_fd = (int)v;
                } else if (strncmp(a, "--device=", 9) == 0 && gpu_target_parse_ull(a + 9, &v) && v < 1024) {
                        o->device = (int)v;
                } else if (strncmp(a, "--seed=", 7) == 0 && gpu_target_parse_ull(a + 7, &v)) {
                        o->seed = v;
                } else if (strncmp(a, "--children=", 11) == 0 && gpu_target_parse_ull(a + 11, &v) &&
                           v <= 64) {
                        o->children = (unsigned)v;
                } else {
                        fprintf(stderr, "cudackpt-gpu-target: bad argument: %s\n", a);
                        gpu_target_usage(stderr);
                        return -EINVAL;
                }
        }
        return 0;
}

double gpu_target_now_ms()
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The UUID in nvidia-smi's spelling: GPU-8-4-4-4-12 lower-case hex. */
void gpu_target_format_uuid(const char bytes[16], char out[64])
{
        const unsigned char *b = reinterpret_cast<const unsigned char *>(bytes);
        snprintf(out, 64,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                 b[12], b[13], b[14], b[15]);
}

/* Status file: written beside itself then renamed, so a reader never sees
 * half a line. */
void gpu_target_write_status(const char *path, const char *line)
{
        char tmp[4096];
        if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
                return;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
                fprintf(stderr, "cudackpt-gpu-target: %s: %s\n", tmp, strerror(errno));
                return;
        }
        size_t len = strlen(line);
        ssize_t n = write(fd, line, len);
        close(fd);
        if (n != (ssize_t)len || rename(tmp, path) != 0)
                fprintf(stderr, "cudackpt-gpu-target: cannot write %s: %s\n", path, strerror(errno));
}

void gpu_target_sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        /* An interrupted sleep is fine: the loop checks the stop flag. */
        nanosleep(&ts, nullptr);
}

#define GPU_TARGET_CHECK(call)                                                                   \
        do {                                                                                     \
                cudaError_t gpu_target_err_ = (call);                                            \
                if (gpu_target_err_ != cudaSuccess) {                                            \
                        fprintf(stderr, "cudackpt-gpu-target: %s: %s (%s)\n", #call,              \
                                cudaGetErrorString(gpu_target_err_),                             \
                                cudaGetErrorName(gpu_target_err_));                              \
                        return gpu_target_err_;                                                  \
                }                                                                                \
        } while (0)

/* Driver entry points, by pointer: the program links only the static
 * runtime.  The 12.8 ABI of each (cuDeviceGetUuid is then the _v2 one, which
 * gives the GPU's own UUID; cuCtxGetDevice takes no context argument). */
typedef CUresult (*gpu_target_ctx_get_device_fn)(CUdevice *dev);
typedef CUresult (*gpu_target_device_get_uuid_fn)(CUuuid *uuid, CUdevice dev);
#define GPU_TARGET_DRIVER_ABI 12080

struct gpu_target_state {
        uint64_t *buf = nullptr;
        uint64_t words = 0;
        unsigned long long *d_counts = nullptr; /* [0] mismatches, [1] first bad index */
        int blocks = 0;
        int threads = 256;
        gpu_target_ctx_get_device_fn ctx_get_device = nullptr;
        gpu_target_device_get_uuid_fn device_get_uuid = nullptr;
};

void *gpu_target_driver_symbol(const char *name)
{
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion(name, &fn, GPU_TARGET_DRIVER_ABI, cudaEnableDefault, &q) !=
                    cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
                (void)cudaGetLastError(); /* not sticky, but keep the slate clean */
                return nullptr;
        }
        return fn;
}

/* The UUID of the GPU this process runs on now, and the runtime's device
 * ordinal; asked anew at every call, never cached here.  "unknown" and -1
 * when the query fails. */
void gpu_target_query_gpu(const gpu_target_state &s, char uuid[64], int *ret_device)
{
        int dev = -1;
        snprintf(uuid, 64, "unknown");
        if (cudaGetDevice(&dev) != cudaSuccess) {
                (void)cudaGetLastError();
                *ret_device = -1;
                return;
        }
        *ret_device = dev;
        if (s.ctx_get_device && s.device_get_uuid) {
                CUdevice cu_dev = 0;
                CUuuid u;
                if (s.ctx_get_device(&cu_dev) == CUDA_SUCCESS && s.device_get_uuid(&u, cu_dev) == CUDA_SUCCESS)
                        gpu_target_format_uuid(u.bytes, uuid);
                return;
        }
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
                gpu_target_format_uuid(prop.uuid.bytes, uuid);
        else
                (void)cudaGetLastError();
}

cudaError_t gpu_target_setup(const gpu_target_opts &o, gpu_target_state *s)
{
        cudaDeviceProp prop;
        GPU_TARGET_CHECK(cudaSetDevice(o.device));
        GPU_TARGET_CHECK(cudaGetDeviceProperties(&prop, o.device));
        s->ctx_get_device = reinterpret_cast<gpu_target_ctx_get_device_fn>(gpu_target_driver_symbol("cuCtxGetDevice"));
        s->device_get_uuid =
                reinterpret_cast<gpu_target_device_get_uuid_fn>(gpu_target_driver_symbol("cuDeviceGetUuid"));

        size_t bytes = (size_t)o.mib << 20;
        s->words = bytes / sizeof(uint64_t);
        if (o.managed)
                GPU_TARGET_CHECK(cudaMallocManaged(reinterpret_cast<void **>(&s->buf), bytes));
        else
                GPU_TARGET_CHECK(cudaMalloc(reinterpret_cast<void **>(&s->buf), bytes));
        GPU_TARGET_CHECK(cudaMalloc(reinterpret_cast<void **>(&s->d_counts), 2 * sizeof(unsigned long long)));
        s->blocks = prop.multiProcessorCount * 8;
        gpu_target_fill<<<s->blocks, s->threads>>>(s->buf, s->words, o.seed);
        GPU_TARGET_CHECK(cudaGetLastError());
        GPU_TARGET_CHECK(cudaDeviceSynchronize());
        return cudaSuccess;
}

cudaError_t gpu_target_verify_once(const gpu_target_opts &o, gpu_target_state *s,
                                   unsigned long long *ret_bad, unsigned long long *ret_first)
{
        unsigned long long h[2] = {0, ~0ULL};
        GPU_TARGET_CHECK(cudaMemcpy(s->d_counts, h, sizeof(h), cudaMemcpyHostToDevice));
        gpu_target_verify<<<s->blocks, s->threads>>>(s->buf, s->words, o.seed, s->d_counts,
                                                     s->d_counts + 1);
        GPU_TARGET_CHECK(cudaGetLastError());
        GPU_TARGET_CHECK(cudaMemcpy(h, s->d_counts, sizeof(h), cudaMemcpyDeviceToHost));
        *ret_bad = h[0];
        *ret_first = h[1];
        return cudaSuccess;
}

/* --children: forks the children before anything touches CUDA (a forked
 * CUDA context is unusable).  Each child returns with its own options and
 * *ret_kids untouched (0); the parent returns with the children's pids.
 * Status file names longer than the buffer fall back to no status file,
 * with a message. */
int gpu_target_fork_children(gpu_target_opts *o, pid_t *kids, unsigned *ret_kids)
{
        static char child_status[4096];
        for (unsigned k = 1; k <= o->children; k++) {
                fflush(stdout);
                fflush(stderr);
                pid_t pid = fork();
                if (pid < 0) {
                        fprintf(stderr, "cudackpt-gpu-target: fork: %s\n", strerror(errno));
                        return -errno;
                }
                if (pid == 0) {
                        if (o->status_path) {
                                if (snprintf(child_status, sizeof(child_status), "%s.child%u", o->status_path,
                                             k) >= (int)sizeof(child_status)) {
                                        fprintf(stderr, "cudackpt-gpu-target: status path too long\n");
                                        o->status_path = nullptr;
                                } else {
                                        o->status_path = child_status;
                                }
                        }
                        if (o->ready_fd >= 0) {
                                close(o->ready_fd);
                                o->ready_fd = -1;
                        }
                        o->seed += k;
                        o->children = 0;
                        *ret_kids = 0;
                        return 0;
                }
                kids[(*ret_kids)++] = pid;
        }
        return 0;
}

void gpu_target_end_children(const pid_t *kids, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                kill(kids[i], SIGTERM);
        for (unsigned i = 0; i < n; i++)
                while (waitpid(kids[i], nullptr, 0) < 0 && errno == EINTR) {
                }
}

} // namespace

int main(int argc, char **argv)
{
        gpu_target_opts o;
        if (gpu_target_parse(argc, argv, &o) < 0)
                return 2;

        pid_t kids[64];
        unsigned n_kids = 0;
        if (o.children > 0 && gpu_target_fork_children(&o, kids, &n_kids) < 0) {
                gpu_target_end_children(kids, n_kids);
                return 2;
        }

        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = gpu_target_on_signal;
        sigaction(SIGTERM, &sa, nullptr);
        sigaction(SIGINT, &sa, nullptr);
        /* A test that reads our stdout through a pipe may go away first. */
        signal(SIGPIPE, SIG_IGN);
        setvbuf(stdout, nullptr, _IOLBF, 0);

        char uuid[64] = "unknown";
        int device = -1;
        gpu_target_state s;
        const char *error = "none";
        cudaError_t err = gpu_target_setup(o, &s);
        if (err != cudaSuccess) {
                gpu_target_query_gpu(s, uuid, &device); /* what is known, for the report */
                char line[512];
                snprintf(line, sizeof(line),
                         "verify iter=0 mismatches=0 total_mismatches=0 first_bad=-1 ms=0 pid=%d "
                         "uuid=%s device=%d bytes=%llu managed=%d error=%s\n",
                         (int)getpid(), uuid, device, o.mib << 20, o.managed ? 1 : 0, cudaGetErrorName(err));
                if (o.status_path)
                        gpu_target_write_status(o.status_path, line);
                gpu_target_end_children(kids, n_kids);
                return 2;
        }

        unsigned long long total = 0;
        int rc = 0;
        for (long long iter = 1; !gpu_target_stop; iter++) {
                unsigned long long bad = 0, first = ~0ULL;
                double t0 = gpu_target_now_ms();
                err = gpu_target_verify_once(o, &s, &bad, &first);
                double ms = gpu_target_now_ms() - t0;
                if (err != cudaSuccess) {
                        error = cudaGetErrorName(err);
                        rc = 2;
                }
                total += bad;
                /* After the verification: the GPU it ran on, even just after
                 * a restore onto another one. */
                gpu_target_query_gpu(s, uuid, &device);
                char first_s[32] = "-1";
                if (bad)
                        snprintf(first_s, sizeof(first_s), "%llu", first);
                char line[512];
                snprintf(line, sizeof(line),
                         "verify iter=%lld mismatches=%llu total_mismatches=%llu first_bad=%s ms=%.3f "
                         "pid=%d uuid=%s device=%d bytes=%llu managed=%d error=%s\n",
                         iter, bad, total, first_s, ms, (int)getpid(), uuid, device, o.mib << 20,
                         o.managed ? 1 : 0, error);
                if (!o.quiet)
                        fputs(line, stdout);
                if (o.status_path)
                        gpu_target_write_status(o.status_path, line);
                if (iter == 1 && o.ready_fd >= 0) {
                        char ready[256];
                        int len = snprintf(ready, sizeof(ready), "ready pid=%d uuid=%s bytes=%llu\n",
                                           (int)getpid(), uuid, o.mib << 20);
                        if (write(o.ready_fd, ready, (size_t)len) != len)
                                fprintf(stderr, "cudackpt-gpu-target: ready fd: %s\n", strerror(errno));
                        close(o.ready_fd);
                        o.ready_fd = -1;
                }
                if (rc == 2)
                        break;
                if (o.iterations > 0 && iter >= o.iterations)
                        break;
                if (o.interval_ms > 0)
                        gpu_target_sleep_ms(o.interval_ms);
        }
        if (rc == 0 && total > 0)
                rc = 1;
        cudaFree(s.buf);
        cudaFree(s.d_counts);
        gpu_target_end_children(kids, n_kids);
        return rc;
}
