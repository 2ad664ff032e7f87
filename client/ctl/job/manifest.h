/* manifest.h: the image directory's manifest.json, written by dump and
 * read (checked) by restore --images. */
#ifndef CUDACKPT_CTL_MANIFEST_H
#define CUDACKPT_CTL_MANIFEST_H

#include "digest.h"

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most trees a job may have: one criu of each runs at once. */
#define CTL_JOB_MAX_TREES 256
#define CTL_JOB_MAX_TREES_TEXT "256"

#define CTL_MANIFEST_NAME "manifest.json"

typedef struct ctl_manifest_tree {
        int root;
        char *images;             /* directory name inside the image directory: "tree-ROOT" */
        int *pids;                /* every process dumped with it */
        size_t n_pids;
        bool pid_ns;              /* its root is a pid namespace's init (manifestns.c) */
        int *ns_pids;             /* ... then each of pids inside that namespace; else NULL */
        bool mnt_ns;              /* ... and a mount namespace of its own (manifestns.h) */
        ctl_digest_set *files;    /* its image files' digests (digest.c); NULL: none (a manifest before them) */
} ctl_manifest_tree;

typedef struct ctl_manifest_member {
        int pid;
        uint64_t start_time;      /* at the dump */
        int tree;                 /* its tree's root */
        char **gpus;              /* UUIDs it held memory on before the dump; NULL: not known */
        size_t n_gpus;
        int ns_pid;               /* its pid inside its tree's pid namespace; 0: none */
} ctl_manifest_member;

typedef struct ctl_manifest {
        cJSON *selector;          /* the dump's selector (owned) */
        char *criu_version;
        bool left_running;
        cJSON *run;               /* dump --run: the job's name record (runreg.h), owned; NULL: none */
        ctl_manifest_tree *trees;
        size_t n_trees;
        ctl_manifest_member *members;
        size_t n_members;
        struct ctl_devrec *devices; /* the device records (manifestgpu.h), owned; NULL: none */
} ctl_manifest;

/* Writes m as DIR/manifest.json through fd (DIR/part_name, open for
 * writing), renamed into place in dir_fd (DIR) once synced, DIR synced
 * after. */
int ctl_manifest_write(const ctl_manifest *m, int dir_fd, int fd, const char *part_name);
/* DIR/manifest.json.tmp-RANDOM, made afresh in dir_fd (O_EXCL|O_NOFOLLOW,
 * mode 0600): its name in name, the descriptor returned, or -errno. */
int ctl_manifest_create_part(int dir_fd, char *name, size_t size);
/* Reads DIR/manifest.json through dir_fd (DIR, as ctl_safedir_open() gives
 * it) and checks it as restore needs it (trees and members agree, at most
 * CTL_JOB_MAX_TREES trees); err gets a sentence on failure. */
int ctl_manifest_read(int dir_fd, const char *dir, ctl_manifest *ret, char *err, size_t err_size);
/* The same for a copy that is only read (cudackptctl verify): the file may
 * be anyone's, but it must still be a regular file. */
int ctl_manifest_read_copy(int dir_fd, const char *dir, ctl_manifest *ret, char *err, size_t err_size);
/* Whether every tree of m has its digests (a manifest written since they
 * were; one that has them for some trees only is refused when read). */
bool ctl_manifest_has_digests(const ctl_manifest *m);
void ctl_manifest_free(ctl_manifest *m);

#endif
