/* The simulated driver's small tools: its error table, strict parsing of
 * numbers, GPU UUIDs and lists, and sleeping. */

#include "sim.h"
#include "sim-errors.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every CUresult of the CUDA 13.0 API (sim-errors.h), by value: cuda-api.h
 * names only the codes the daemon itself uses. */
#define SIM_E(name, value, text) { (CUresult)(value), #name, text },
static const struct sim_error sim_errors[] = { SIM_ERRORS(SIM_E) };
#undef SIM_E

const struct sim_error *sim_error_by_code(CUresult code) {
        for (size_t i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++)
                if (sim_errors[i].code == code)
                        return &sim_errors[i];
        return NULL;
}

const struct sim_error *sim_error_by_name(const char *name, size_t len) {
        for (size_t i = 0; i < sizeof(sim_errors) / sizeof(sim_errors[0]); i++)
                if (strlen(sim_errors[i].name) == len && memcmp(sim_errors[i].name, name, len) == 0)
                        return &sim_errors[i];
        return NULL;
}

/* --------------------------------------------------------------- parsing */

/* Parses the decimal number s[0..len) strictly: digits only (no sign, no
 * blanks, no empty string), at most max. */
int sim_parse_ulong(const char *s, size_t len, unsigned long long max,
                           unsigned long long *ret_value) {
        char buf[32];
        char *end;
        unsigned long long v;

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (!isdigit((unsigned char) s[i]))
                        return -EINVAL;
        memcpy(buf, s, len);
        buf[len] = '\0';
        errno = 0;
        v = strtoull(buf, &end, 10);
        if (errno != 0 || *end != '\0' || v > max)
                return -EINVAL;
        *ret_value = v;
        return 0;
}

int sim_parse_ulong_str(const char *s, unsigned long long max, unsigned long long *ret_value) {
        return sim_parse_ulong(s, strlen(s), max, ret_value);
}

static int sim_hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Parses a GPU UUID: "GPU-" and 8-4-4-4-12 hex digits as nvidia-smi prints
 * it; the prefix and the hyphens (only at those places) may be left out. */
int sim_parse_uuid(const char *s, size_t len, CUuuid *ret_uuid) {
        CUuuid u;
        size_t nibbles = 0;

        if (len >= 4 && strncmp(s, "GPU-", 4) == 0) {
                s += 4;
                len -= 4;
        }
        memset(&u, 0, sizeof(u));
        for (size_t i = 0; i < len; i++) {
                int v;

                if (s[i] == '-') {
                        if (nibbles != 8 && nibbles != 12 && nibbles != 16 && nibbles != 20)
                                return -EINVAL;
                        if (i + 1 < len && s[i + 1] == '-')
                                return -EINVAL;
                        continue;
                }
                v = sim_hexval(s[i]);
                if (v < 0 || nibbles >= 32)
                        return -EINVAL;
                u.bytes[nibbles / 2] = (char) (unsigned char) ((unsigned char) u.bytes[nibbles / 2] |
                                                               (v << (nibbles % 2 ? 0 : 4)));
                nibbles++;
        }
        if (nibbles != 32 || (len > 0 && s[len - 1] == '-'))
                return -EINVAL;
        *ret_uuid = u;
        return 0;
}

bool sim_uuid_eq(const CUuuid *a, const CUuuid *b) {
        return memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

/* Calls fn for each comma-separated item of s (empty items included). */
int sim_for_each_item(const char *s, int (*fn)(const char *item, size_t len, void *userdata),
                             void *userdata) {
        for (;;) {
                const char *comma = strchr(s, ',');
                size_t len = comma ? (size_t) (comma - s) : strlen(s);
                int r = fn(s, len, userdata);

                if (r < 0)
                        return r;
                if (!comma)
                        return 0;
                s = comma + 1;
        }
}

/* ------------------------------------------------------------------ time */

/* Sleeps ns nanoseconds of real time, whatever signals arrive. */
void sim_sleep_ns(unsigned long long ns) {
        struct timespec deadline;

        if (ns == 0)
                return;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t) (ns / 1000000000ull);
        deadline.tv_nsec += (long) (ns % 1000000000ull);
        if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
                ;
}

/* The time a transfer of mem_mib at mibps MiB/s takes. */
unsigned long long sim_transfer_ns(unsigned long long mem_mib, unsigned long long mibps) {
        return mem_mib * 1000000000ull / mibps;
}

bool sim_all_zero(const void *p, size_t n) {
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}
