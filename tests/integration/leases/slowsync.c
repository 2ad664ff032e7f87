/* slowsync.c: an LD_PRELOAD library for the daemon under test, standing
 * for a slow disk: fsync() and fdatasync() take CUDACKPT_TEST_FSYNC_DELAY_MS
 * (read at load, before the daemon touches its environment) longer. */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long delay_ms;

__attribute__((constructor)) static void slowsync_init(void)
{
        const char *v = getenv("CUDACKPT_TEST_FSYNC_DELAY_MS");

        delay_ms = v ? atol(v) : 0;
}

static void slowsync_delay(void)
{
        struct timespec ts = { .tv_sec = delay_ms / 1000, .tv_nsec = delay_ms % 1000 * 1000000L };

        while (delay_ms > 0 && nanosleep(&ts, &ts) < 0)
                ;
}

__attribute__((visibility("default"))) int fsync(int fd)
{
        int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

        slowsync_delay();
        return real(fd);
}

__attribute__((visibility("default"))) int fdatasync(int fd)
{
        int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");

        slowsync_delay();
        return real(fd);
}
