/* runreg.c: the names of `cudackptctl run`'s jobs (runreg.h).
 *
 * DIR/NAME holds one JSON object: name, uid, gid, init_pid,
 * init_start_time, cgroup.  Every file is made and read through DIR's
 * descriptor, opened by safedir.c's checked walk (root's, no one else may
 * write it); a record is written to a temporary file and renamed into
 * place with RENAME_NOREPLACE, under flock(DIR), so two jobs never get one
 * name.  A record whose init is gone (or whose pid another process now
 * holds: its start time differs) is stale: it names nothing, and is
 * removed by the next run or list. */
#include "runreg.h"
#include "fdio.h"

#include "json.h"
#include "proctree.h"
#include "safedir.h"

#include <cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most a record file holds. */
#define RUNREG_MAX_BYTES 4096

bool ctl_run_name_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > CTL_RUN_NAME_MAX || name[0] == '.' || name[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];

                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '.' || c == '-'))
                        return false;
        }
        return true;
}

int ctl_run_dir_open(bool create, int *ret_fd, char *err, size_t err_size) {
        const char *path = getenv(CTL_RUN_DIR_ENV);

        if (!path || !*path)
                path = CTL_RUN_DIR_DEFAULT;
        return ctl_safedir_open(path, create, ret_fd, err, err_size);
}

cJSON *ctl_run_record_json(const ctl_run_record *rec) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "name", rec->name) ||
            !cJSON_AddNumberToObject(o, "uid", (double) rec->uid) ||
            !cJSON_AddNumberToObject(o, "gid", (double) rec->gid) ||
            !cJSON_AddNumberToObject(o, "init_pid", rec->init_pid) ||
            !cJSON_AddNumberToObject(o, "init_start_time", (double) rec->init_start_time) ||
            !cJSON_AddStringToObject(o, "cgroup", rec->cgroup)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

int ctl_run_record_from_json(const cJSON *o, ctl_run_record *ret) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *cg = cJSON_GetObjectItemCaseSensitive(o, "cgroup");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "init_start_time");
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "uid");
        const cJSON *gid = cJSON_GetObjectItemCaseSensitive(o, "gid");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "init_pid");

        if (!cJSON_IsString(n) || !ctl_run_name_valid(n->valuestring) || !cJSON_IsString(cg) ||
            strlen(cg->valuestring) >= sizeof(ret->cgroup) || !json_is_integer(uid, 0, 4294967294.0) ||
            !json_is_integer(gid, 0, 4294967294.0) || !json_is_integer(pid, 1, INT_MAX) ||
            !json_is_integer(st, 1, 9007199254740992.0))
                return -EBADMSG;
        *ret = (ctl_run_record) { .uid = (uid_t) uid->valuedouble, .gid = (gid_t) gid->valuedouble,
                                  .init_pid = (int) pid->valuedouble,
                                  .init_start_time = (uint64_t) st->valuedouble };
        snprintf(ret->name, sizeof(ret->name), "%s", n->valuestring);
        snprintf(ret->cgroup, sizeof(ret->cgroup), "%s", cg->valuestring);
        return 0;
}

int ctl_run_record_read(int dir_fd, const char *name, ctl_run_record *ret) {
        char text[RUNREG_MAX_BYTES + 1];
        struct stat st;
        ssize_t k;
        cJSON *o;
        int fd, r;

        if (!ctl_run_name_valid(name))
                return -ENOENT;
        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? -EBADMSG : -errno;
        if (fstat(fd, &st) < 0 || !ctl_safedir_owned(&st, S_IFREG)) {
                close(fd);
                return -EBADMSG;
        }
        k = read(fd, text, RUNREG_MAX_BYTES);
        close(fd);
        if (k < 0)
                return -EBADMSG;
        text[k] = '\0';
        o = cJSON_Parse(text);
        r = o ? ctl_run_record_from_json(o, ret) : -EBADMSG;
        /* A record under another name is no record of this one. */
        if (r == 0 && strcmp(ret->name, name) != 0)
                r = -EBADMSG;
        cJSON_Delete(o);
        return r;
}

bool ctl_run_record_live(const ctl_run_record *rec) {
        return ctl_proc_start_time(rec->init_pid) == rec->init_start_time;
}

/* A bound from the environment (env), else def. */
static long runreg_bound(const char *env, long def) {
        const char *v = getenv(env);
        char *end;
        long n;

        if (!v || !*v)
                return def;
        n = strtol(v, &end, 10);
        return *end == '\0' && n > 0 ? n : def;
}

/* fn(data, rec) for every live record of dir_fd; a stale one is removed
 * (with remove_stale) or skipped. */
static int runreg_each(int dir_fd, bool remove_stale, void (*fn)(void *data, const ctl_run_record *rec),
                       void *data) {
        struct dirent *de;
        ctl_run_record rec;
        DIR *d;
        int r = fdio_opendir(dir_fd, &d);

        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                if (!ctl_run_name_valid(de->d_name) || ctl_run_record_read(dir_fd, de->d_name, &rec) < 0)
                        continue;
                if (!ctl_run_record_live(&rec)) {
                        if (remove_stale)
                                (void) unlinkat(dir_fd, de->d_name, 0);
                        continue;
                }
                fn(data, &rec);
        }
        closedir(d);
        return 0;
}

/* What runreg_sweep() counts. */
typedef struct runreg_count {
        uid_t uid;
        long all, mine;
} runreg_count;

static void runreg_count_one(void *data, const ctl_run_record *rec) {
        runreg_count *c = data;

        c->all++;
        c->mine += rec->uid == c->uid;
}

/* Under the lock: stale records removed; the live ones counted, in all
 * and of uid. */
static int runreg_sweep(int dir_fd, uid_t uid, long *ret_all, long *ret_uid) {
        runreg_count c = { .uid = uid };
        int r = runreg_each(dir_fd, true, runreg_count_one, &c);

        *ret_all = c.all;
        *ret_uid = c.mine;
        return r;
}

/* rec to a fresh temporary file in dir_fd, synced; its name in tmp. */
static int runreg_write_tmp(int dir_fd, const ctl_run_record *rec, char *tmp, size_t size) {
        cJSON *o = ctl_run_record_json(rec);
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;
        unsigned rnd = 0;
        int fd = -1, r = 0;

        cJSON_Delete(o);
        if (!text)
                return -ENOMEM;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                rnd = (unsigned) getpid(); /* the name is made O_EXCL anyway */
        snprintf(tmp, size, ".tmp-%s-%08x", rec->name, rnd);
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                r = -errno;
        else if (write(fd, text, strlen(text)) != (ssize_t) strlen(text) || fsync(fd) < 0)
                r = errno ? -errno : -EIO;
        if (fd >= 0)
                close(fd);
        if (r < 0 && fd >= 0)
                (void) unlinkat(dir_fd, tmp, 0);
        cJSON_free(text);
        return r;
}

int ctl_run_record_add(int dir_fd, const ctl_run_record *rec, long *ret_limit, bool *ret_per_uid) {
        long all = 0, mine = 0, max_all = runreg_bound(CTL_RUN_MAX_JOBS_ENV, CTL_RUN_MAX_JOBS);
        long max_uid = runreg_bound(CTL_RUN_MAX_JOBS_PER_UID_ENV, CTL_RUN_MAX_JOBS_PER_UID);
        char tmp[CTL_RUN_NAME_MAX + 32];
        int r;

        if (flock(dir_fd, LOCK_EX) < 0)
                return -errno;
        r = runreg_sweep(dir_fd, rec->uid, &all, &mine);
        if (r == 0 && (all >= max_all || mine >= max_uid)) {
                *ret_per_uid = mine >= max_uid;
                *ret_limit = *ret_per_uid ? max_uid : max_all;
                r = -EUSERS;
        }
        if (r == 0)
                r = runreg_write_tmp(dir_fd, rec, tmp, sizeof(tmp));
        if (r == 0 && renameat2(dir_fd, tmp, dir_fd, rec->name, RENAME_NOREPLACE) < 0) {
                r = -errno;
                (void) unlinkat(dir_fd, tmp, 0);
        }
        if (r == 0 && fsync(dir_fd) < 0)
                r = -errno;
        (void) flock(dir_fd, LOCK_UN);
        return r;
}

void ctl_run_record_remove(int dir_fd, const ctl_run_record *rec) {
        ctl_run_record now;

        if (flock(dir_fd, LOCK_EX) < 0)
                return;
        if (ctl_run_record_read(dir_fd, rec->name, &now) == 0 && now.init_pid == rec->init_pid &&
            now.init_start_time == rec->init_start_time)
                (void) unlinkat(dir_fd, rec->name, 0);
        (void) flock(dir_fd, LOCK_UN);
}

int ctl_run_resolve(const char *name, ctl_run_record *ret, char *err, size_t err_size) {
        ctl_run_record rec;
        int fd, r;

        if (!ctl_run_name_valid(name)) {
                snprintf(err, err_size, "'%.*s' is not a job name (1 to %d of A-Z a-z 0-9 _ . -)", CTL_RUN_NAME_MAX,
                         name, CTL_RUN_NAME_MAX);
                return -EINVAL;
        }
        r = ctl_run_dir_open(false, &fd, err, err_size);
        if (r < 0)
                return r == -ENOENT ? (snprintf(err, err_size, "no job named %s", name), -ENOENT) : r;
        r = ctl_run_record_read(fd, name, &rec);
        close(fd);
        if (r == -ENOENT)
                snprintf(err, err_size, "no job named %s", name);
        else if (r < 0)
                snprintf(err, err_size, "the record of job %s is not one cudackptctl run wrote", name);
        else if (!ctl_run_record_live(&rec)) {
                snprintf(err, err_size, "job %s has ended (its init, pid %d, is gone or the pid is another "
                         "process's now)", name, rec.init_pid);
                r = -ENOENT;
        } else
                *ret = rec;
        return r;
}

/* What ctl_run_list() prints to. */
typedef struct runreg_out {
        FILE *f;
        cJSON *arr;               /* json: the array; else NULL */
        size_t n;
} runreg_out;

static void runreg_print_one(void *data, const ctl_run_record *rec) {
        runreg_out *o = data;

        if (o->arr) {
                cJSON *x = ctl_run_record_json(rec);
                if (x && !cJSON_AddItemToArray(o->arr, x))
                        cJSON_Delete(x);
        } else {
                if (o->n == 0)
                        fprintf(o->f, "%-24s %8s %8s %8s  %s\n", "NAME", "INIT", "UID", "GID", "CGROUP");
                fprintf(o->f, "%-24s %8d %8u %8u  %s\n", rec->name, rec->init_pid, (unsigned) rec->uid,
                        (unsigned) rec->gid, rec->cgroup[0] ? rec->cgroup : "-");
        }
        o->n++;
}

int ctl_run_list(FILE *f, bool json) {
        runreg_out o = { .f = f, .arr = json ? cJSON_CreateArray() : NULL };
        char err[PATH_MAX + 256], *text;
        int fd = -1, r = ctl_run_dir_open(false, &fd, err, sizeof(err));

        if (json && !o.arr)
                return -ENOMEM;
        if (r == 0) {
                r = runreg_each(fd, false, runreg_print_one, &o);
                close(fd);
        } else if (r == -ENOENT)
                r = 0; /* no job was ever started here */
        if (json && r == 0) {
                text = cJSON_PrintUnformatted(o.arr);
                if (text)
                        fprintf(f, "%s\n", text);
                cJSON_free(text);
        }
        cJSON_Delete(o.arr);
        return r;
}
