/* procindex.bpf.c: the kernel side of the process index (procindex.c).
 *
 * Keeps the set of processes (by global tgid) that may map the CUDA driver:
 *  - a process that maps the driver's file (the very file the daemon loaded,
 *    or any file named libcuda.so*) is added at the mmap;
 *  - a new process forked by one in the set is added (it inherits the
 *    mapping without mapping anything);
 *  - a process is removed when it execs (its mappings are gone; a new image
 *    that maps the driver is added again) and when its last thread exits.
 * The set is a superset: user space checks each entry's maps before using
 * it.  Not seen: a process sharing its memory with one that maps the driver
 * without being its thread or its child (clone(CLONE_VM) of an unrelated
 * one), and 32-bit programs' mmap2 (CUDA has none).  An entry that could not be added (the map full) is counted in
 * `lost`, and user space stops trusting the set.
 *
 * Types are declared here with only the fields used; CO-RE relocates them
 * against the running kernel's BTF, so one object serves every kernel. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define PRESERVE __attribute__((preserve_access_index))

struct super_block {
        __u32 s_dev;
} PRESERVE;

struct inode {
        unsigned long i_ino;
        struct super_block *i_sb;
} PRESERVE;

struct qstr {
        const unsigned char *name;
} PRESERVE;

struct dentry {
        struct qstr d_name;
} PRESERVE;

struct path {
        struct dentry *dentry;
} PRESERVE;

struct file {
        struct path f_path;
        struct inode *f_inode;
} PRESERVE;

typedef struct {
        int counter;
} atomic_t;

struct signal_struct {
        atomic_t live;
} PRESERVE;

struct fdtable {
        unsigned int max_fds;
        struct file **fd;
} PRESERVE;

struct files_struct {
        struct fdtable *fdt;
} PRESERVE;

struct task_struct {
        int pid;
        int tgid;
        struct files_struct *files;
        struct signal_struct *signal;
} PRESERVE;

/* syscalls/sys_enter_mmap: the common header, the syscall's number, its six
 * arguments (a stable layout, tracefs's format file). */
struct sys_enter_mmap_args {
        __u64 common;
        __s32 nr;
        __u32 pad;
        __u64 addr, len, prot, flags, fd, off;
};

#define MAP_ANONYMOUS 0x20

/* The set: tgid -> 1. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 65536); /* set by user space before loading */
        __type(key, __u32);
        __type(value, __u8);
} procs SEC(".maps");

/* [0]: the driver's device (the kernel's encoding) and inode, set by user space. */
struct driver_file {
        __u64 dev;
        __u64 ino;
};
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct driver_file);
} driver SEC(".maps");

/* [0]: entries that could not be added. */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} lost SEC(".maps");

static void add(__u32 tgid)
{
        __u8 one = 1;

        if (bpf_map_update_elem(&procs, &tgid, &one, BPF_ANY) < 0) {
                __u32 k = 0;
                __u64 *n = bpf_map_lookup_elem(&lost, &k);
                if (n)
                        __sync_fetch_and_add(n, 1);
        }
}

static int is_driver(struct file *file)
{
        __u32 k = 0;
        struct driver_file *d = bpf_map_lookup_elem(&driver, &k);
        struct inode *inode = BPF_CORE_READ(file, f_inode);
        const unsigned char *name;
        char buf[11] = {};

        if (d && inode && d->ino && BPF_CORE_READ(inode, i_ino) == d->ino &&
            BPF_CORE_READ(inode, i_sb, s_dev) == d->dev)
                return 1;
        name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
        if (!name || bpf_probe_read_kernel(buf, 10, name) < 0)
                return 0;
        for (int i = 0; i < 10; i++)
                if (buf[i] != "libcuda.so"[i])
                        return 0;
        return 1;
}

/* The mmap, one of two ways (user space loads the first the kernel takes):
 * a trampoline on the LSM hook every file mapping passes, at no cost to
 * anything else; or the mmap system call's tracepoint, which every kernel
 * with syscall tracepoints has, but which sends every system call through
 * the kernel's slower tracing path while attached. */
SEC("fentry/security_mmap_file")
int BPF_PROG(procindex_mmap_fentry, struct file *file, unsigned long prot, unsigned long flags)
{
        if (file && is_driver(file))
                add((__u32)(bpf_get_current_pid_tgid() >> 32));
        return 0;
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int procindex_mmap_tp(struct sys_enter_mmap_args *a)
{
        struct task_struct *t = (struct task_struct *)bpf_get_current_task();
        __u32 fd = (__u32)a->fd; /* as the kernel takes it (fget) */
        struct fdtable *fdt;
        struct file **fds, *file = NULL;

        if (a->flags & MAP_ANONYMOUS)
                return 0;
        fdt = BPF_CORE_READ(t, files, fdt);
        if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
                return 0;
        fds = BPF_CORE_READ(fdt, fd);
        if (!fds || bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) < 0 || !file)
                return 0;
        if (is_driver(file))
                add((__u32)(bpf_get_current_pid_tgid() >> 32));
        return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(procindex_fork, struct task_struct *parent, struct task_struct *child)
{
        __u32 ptgid = (__u32)BPF_CORE_READ(parent, tgid), ctgid = (__u32)BPF_CORE_READ(child, tgid);

        if (ctgid != ptgid && bpf_map_lookup_elem(&procs, &ptgid))
                add(ctgid);
        return 0;
}

/* Runs in the process, after the old image is gone and before the new one
 * maps any library. */
SEC("raw_tp/sched_process_exec")
int BPF_PROG(procindex_exec)
{
        __u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);

        bpf_map_delete_elem(&procs, &tgid);
        return 0;
}

/* The last thread to exit: the process is dead (a zombie until reaped, so
 * its pid cannot be another's yet). */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(procindex_exit, struct task_struct *p)
{
        __u32 tgid = (__u32)BPF_CORE_READ(p, tgid);

        if (BPF_CORE_READ(p, signal, live.counter) == 0)
                bpf_map_delete_elem(&procs, &tgid);
        return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
