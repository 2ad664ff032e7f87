/* A target's configuration, from its environment as /proc/PID/environ
 * shows it at the time of the call (sim.c lists the variables). */

#include "sim.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>


static const char *const sim_op_names[SIM_OP_COUNT] = {
        [SIM_OP_LOCK] = "lock",           [SIM_OP_CHECKPOINT] = "checkpoint",
        [SIM_OP_RESTORE] = "restore",     [SIM_OP_UNLOCK] = "unlock",
        [SIM_OP_GETSTATE] = "getstate",   [SIM_OP_TID] = "tid",
};

/* The name CUDACKPT_SIM_FAIL gives op; its first letter is what the step
 * slot reads while op works (in upper case while op waits to work). */
const char *sim_op_name(enum sim_op op) {
        return sim_op_names[op];
}

/* The value of NAME in a NUL-separated environment block, first one wins as
 * with getenv(). */
static const char *sim_environ_get(const char *env, size_t len, const char *name) {
        size_t name_len = strlen(name);

        for (size_t off = 0; off < len;) {
                const char *entry = env + off;
                size_t entry_len = strlen(entry); /* the block ends with a NUL */

                if (entry_len > name_len && memcmp(entry, name, name_len) == 0 && entry[name_len] == '=')
                        return entry + name_len + 1;
                off += entry_len + 1;
        }
        return NULL;
}

static void sim_env_number(const char *env, size_t len, const char *name, unsigned long long min,
                           unsigned long long max, unsigned long long *value) {
        const char *v = sim_environ_get(env, len, name);
        unsigned long long n;

        if (v && sim_parse_ulong_str(v, max, &n) == 0 && n >= min)
                *value = n;
}

static bool sim_env_flag(const char *env, size_t len, const char *name) {
        unsigned long long v = 0;

        sim_env_number(env, len, name, 0, ULLONG_MAX, &v);
        return v != 0;
}

static int sim_add_gpu_item(const char *item, size_t len, void *userdata) {
        struct sim_config *cfg = userdata;
        unsigned long long index;
        CUuuid u;

        if (cfg->n_gpus >= SIM_MAX_DEVICES)
                return -E2BIG;
        if (sim_parse_ulong(item, len, INT_MAX, &index) == 0) {
                if (index >= (unsigned long long) sim_driver.n_devices)
                        return -ENODEV;
                u = sim_driver.devices[index];
        } else if (sim_parse_uuid(item, len, &u) < 0) {
                return -EINVAL;
        }
        for (int i = 0; i < cfg->n_gpus; i++)
                if (sim_uuid_eq(&cfg->gpus[i], &u))
                        return 0; /* named twice: one GPU */
        cfg->gpus[cfg->n_gpus++] = u;
        return 0;
}

/* One "op:CUDA_ERROR_NAME[:failed]" item of CUDACKPT_SIM_FAIL; a bad item is
 * ignored on its own.  The error may also be given as a number. */
static int sim_add_fail_item(const char *item, size_t len, void *userdata) {
        struct sim_config *cfg = userdata;
        const char *colon = memchr(item, ':', len), *name, *rest;
        size_t op_len, name_len;
        struct sim_fail f = { .set = true };
        int op = -1;

        if (!colon)
                return 0;
        op_len = (size_t) (colon - item);
        for (int i = 0; i < SIM_OP_COUNT; i++)
                if (strlen(sim_op_names[i]) == op_len && memcmp(sim_op_names[i], item, op_len) == 0)
                        op = i;
        if (op < 0)
                return 0;
        name = colon + 1;
        rest = memchr(name, ':', len - op_len - 1);
        name_len = rest ? (size_t) (rest - name) : len - op_len - 1;
        if (rest) {
                size_t rest_len = len - op_len - 1 - name_len;

                if (rest_len != strlen(":failed") || memcmp(rest, ":failed", rest_len) != 0)
                        return 0;
                f.to_failed = true;
        }
        {
                const struct sim_error *e = sim_error_by_name(name, name_len);
                unsigned long long n;

                if (e)
                        f.code = e->code;
                else if (sim_parse_ulong(name, name_len, INT_MAX, &n) == 0)
                        f.code = (CUresult) n;
                else
                        return 0;
        }
        cfg->fail[op] = f;
        return 0;
}

/* The letters of the state slot, by state. */
static const struct {
        CUprocessState state;
        char letter;
} sim_slot_letters[] = {
        { CU_PROCESS_STATE_RUNNING, 'r' },
        { CU_PROCESS_STATE_LOCKED, 'l' },
        { CU_PROCESS_STATE_CHECKPOINTED, 'c' },
        { CU_PROCESS_STATE_FAILED, 'f' },
};

static int sim_slot_state(char letter, CUprocessState *ret_state) {
        for (size_t i = 0; i < sizeof(sim_slot_letters) / sizeof(sim_slot_letters[0]); i++)
                if (sim_slot_letters[i].letter == letter) {
                        *ret_state = sim_slot_letters[i].state;
                        return 0;
                }
        return -EINVAL;
}

char sim_slot_letter(CUprocessState state) {
        for (size_t i = 0; i < sizeof(sim_slot_letters) / sizeof(sim_slot_letters[0]); i++)
                if (sim_slot_letters[i].state == state)
                        return sim_slot_letters[i].letter;
        return '\0';
}

void sim_config_parse(const char *env, size_t len, bool is_self, struct sim_config *ret_cfg) {
        struct sim_config cfg = {
                .mem_mib = 64,
                .ckpt_mibps = 2048,
                .restore_mibps = 4096,
        };
        CUprocessState cuda_state = CU_PROCESS_STATE_RUNNING;
        const char *v, *cuda;
        bool cuda_letter;

        /* The caller itself counts as a CUDA process once it called cuInit:
         * the real driver answers GetState on the caller with "running".
         * CUDACKPT_SIM holds the letter of a state once the default slot
         * (below) has been written, and still names a CUDA process. */
        cuda = sim_environ_get(env, len, "CUDACKPT_SIM");
        cuda_letter = cuda && cuda[0] != '\0' && cuda[1] == '\0' && sim_slot_state(cuda[0], &cuda_state) == 0;
        cfg.cuda = sim_env_flag(env, len, "CUDACKPT_SIM") || cuda_letter ||
                (is_self && atomic_load(&sim_initialized));
        /* Capped so that mem * 1e9 / speed cannot overflow 64 bits. */
        sim_env_number(env, len, "CUDACKPT_SIM_MEM_MIB", 0, 1ull << 24, &cfg.mem_mib);
        sim_env_number(env, len, "CUDACKPT_SIM_CKPT_MIBPS", 1, 1ull << 24, &cfg.ckpt_mibps);
        sim_env_number(env, len, "CUDACKPT_SIM_RESTORE_MIBPS", 1, 1ull << 24, &cfg.restore_mibps);
        sim_env_number(env, len, "CUDACKPT_SIM_BUSY_MS", 0, UINT32_MAX, &cfg.busy_ms);
        sim_env_number(env, len, "CUDACKPT_SIM_PRE_WAIT_MS", 0, UINT32_MAX, &cfg.pre_wait_ms);
        cfg.managed = sim_env_flag(env, len, "CUDACKPT_SIM_MANAGED");

        v = sim_environ_get(env, len, "CUDACKPT_SIM_STATE_VALUE");
        if (v) {
                unsigned long long n;

                if (sim_parse_ulong_str(v, INT_MAX, &n) == 0) {
                        cfg.state_value_set = true;
                        cfg.state_value = (unsigned) n;
                }
        }

        /* The slot is the entry getenv() would find, the first one; any value
         * but one known letter is no slot.  Without CUDACKPT_SIM_STATE, the
         * one character of CUDACKPT_SIM=1 is the slot: "1" until the first
         * change of state (running), then the letter. */
        v = sim_environ_get(env, len, SIM_SLOT_NAME);
        if (v && v[0] != '\0' && v[1] == '\0' && sim_slot_state(v[0], &cfg.slot_state) == 0) {
                cfg.slot_set = true;
                cfg.slot_offset = (size_t) (v - env);
        } else if (!v && (cuda_letter || (cuda && strcmp(cuda, "1") == 0))) {
                cfg.slot_set = true;
                cfg.slot_offset = (size_t) (cuda - env);
                cfg.slot_state = cuda_letter ? cuda_state : CU_PROCESS_STATE_RUNNING;
        }

        /* The step slot, like the state slot, is the first entry; any one
         * character is a slot. */
        v = sim_environ_get(env, len, SIM_STEP_SLOT_NAME);
        if (v && v[0] != '\0' && v[1] == '\0') {
                cfg.step_slot_set = true;
                cfg.step_slot_offset = (size_t) (v - env);
        }

        v = sim_environ_get(env, len, "CUDACKPT_SIM_GPUS");
        if (!v || !*v || sim_for_each_item(v, sim_add_gpu_item, &cfg) < 0) {
                /* Default, also for a bad list: the process uses device 0. */
                cfg.n_gpus = 0;
                if (sim_driver.n_devices > 0) {
                        cfg.gpus[0] = sim_driver.devices[0];
                        cfg.n_gpus = 1;
                }
        }

        v = sim_environ_get(env, len, "CUDACKPT_SIM_FAIL");
        if (v)
                (void) sim_for_each_item(v, sim_add_fail_item, &cfg);

        *ret_cfg = cfg;
}

