/* d2h.cu: the copy rates a checkpoint and a restore can be compared with.
 *
 * A checkpoint moves GPU memory into the target's host memory and a
 * restore moves it back, so the ceiling is cudaMemcpy between the GPU and
 * host memory on the same machine.  This measures device->host and
 * host->device, from pinned (cudaMallocHost) and from pageable (malloc,
 * touched first so that page faults are not counted) memory; medians over
 * --repeats copies of --mib MiB.  GB = 1e9 bytes.  Prints a report and
 * "RESULT bench=d2h ..." lines. */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#define D2H_CHECK(call)                                                                                 \
        do {                                                                                            \
                cudaError_t d2h_err_ = (call);                                                          \
                if (d2h_err_ != cudaSuccess) {                                                          \
                        fprintf(stderr, "cudackpt-bench-d2h: %s: %s\n", #call, cudaGetErrorString(d2h_err_)); \
                        exit(1);                                                                        \
                }                                                                                       \
        } while (0)

double d2h_median(std::vector<double> v)
{
        std::sort(v.begin(), v.end());
        size_t n = v.size();
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median GB/s of `repeats` synchronous copies, after one warm-up copy. */
double d2h_rate(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int repeats,
                double *ret_best)
{
        std::vector<double> rates;
        D2H_CHECK(cudaMemcpy(dst, src, bytes, kind));
        for (int i = 0; i < repeats; i++) {
                auto t0 = std::chrono::steady_clock::now();
                D2H_CHECK(cudaMemcpy(dst, src, bytes, kind));
                auto t1 = std::chrono::steady_clock::now();
                double s = std::chrono::duration<double>(t1 - t0).count();
                rates.push_back((double)bytes / 1e9 / s);
        }
        *ret_best = *std::max_element(rates.begin(), rates.end());
        return d2h_median(rates);
}

} // namespace

int main(int argc, char **argv)
{
        unsigned long long mib = 1024;
        int repeats = 10;
        bool pageable = true;
        for (int i = 1; i < argc; i++) {
                if (strncmp(argv[i], "--mib=", 6) == 0 && atoll(argv[i] + 6) > 0) {
                        mib = (unsigned long long)atoll(argv[i] + 6);
                } else if (strncmp(argv[i], "--repeats=", 10) == 0 && atoi(argv[i] + 10) > 0) {
                        repeats = atoi(argv[i] + 10);
                } else if (strcmp(argv[i], "--no-pageable") == 0) {
                        pageable = false;
                } else {
                        fprintf(stderr, "usage: cudackpt-bench-d2h [--mib=N] [--repeats=N] [--no-pageable]\n");
                        return 2;
                }
        }
        size_t bytes = (size_t)mib << 20;
        cudaDeviceProp prop;
        D2H_CHECK(cudaGetDeviceProperties(&prop, 0));
        void *dev = nullptr, *pinned = nullptr;
        D2H_CHECK(cudaMalloc(&dev, bytes));
        D2H_CHECK(cudaMemset(dev, 0x5a, bytes));
        D2H_CHECK(cudaMallocHost(&pinned, bytes));
        memset(pinned, 0xa5, bytes);

        printf("== cudaMemcpy rates on %s, %llu MiB, %d repeats (median / best, GB = 1e9 bytes) ==\n", prop.name,
               mib, repeats);
        struct {
                const char *name;
                const char *key;
                bool pinned;
                cudaMemcpyKind kind;
        } cases[] = {
                {"device -> host, pinned", "d2h-pinned", true, cudaMemcpyDeviceToHost},
                {"host -> device, pinned", "h2d-pinned", true, cudaMemcpyHostToDevice},
                {"device -> host, pageable", "d2h-pageable", false, cudaMemcpyDeviceToHost},
                {"host -> device, pageable", "h2d-pageable", false, cudaMemcpyHostToDevice},
        };
        void *host_pageable = nullptr;
        if (pageable) {
                host_pageable = malloc(bytes);
                if (!host_pageable) {
                        fprintf(stderr, "cudackpt-bench-d2h: malloc %zu: out of memory\n", bytes);
                        pageable = false;
                } else {
                        memset(host_pageable, 0xa5, bytes); /* fault every page in before timing */
                }
        }
        for (const auto &c : cases) {
                if (!c.pinned && !pageable)
                        continue;
                void *host = c.pinned ? pinned : host_pageable;
                double best = 0;
                double med = c.kind == cudaMemcpyDeviceToHost ? d2h_rate(host, dev, bytes, c.kind, repeats, &best)
                                                               : d2h_rate(dev, host, bytes, c.kind, repeats, &best);
                printf("  %-28s %8.2f GB/s  (best %.2f)\n", c.name, med, best);
                printf("RESULT bench=d2h case=%s mib=%llu repeats=%d median_gbps=%.3f best_gbps=%.3f\n", c.key, mib,
                       repeats, med, best);
        }
        free(host_pageable);
        cudaFreeHost(pinned);
        cudaFree(dev);
        return 0;
}
