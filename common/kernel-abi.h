/* kernel-abi.h: the Linux interfaces the project uses that older headers
 * lack, each defined only where the headers do not.  The values and
 * layouts are the kernel's ABI.  Shared by the daemon, which uses them,
 * and cudackptctl's doctor, which checks that the running kernel has
 * them. */
#ifndef CUDACKPT_KERNEL_ABI_H
#define CUDACKPT_KERNEL_ABI_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* Linux 5.3 */
#endif

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* <linux/nsfs.h>, Linux 6.7: a pid between a pid namespace and the caller's. */
#define CUDACKPT_NSIO 0xb7
#ifndef NS_GET_PID_FROM_PIDNS
#define NS_GET_PID_FROM_PIDNS _IOR(CUDACKPT_NSIO, 0x6, int)
#endif
#ifndef NS_GET_PID_IN_PIDNS
#define NS_GET_PID_IN_PIDNS _IOR(CUDACKPT_NSIO, 0x8, int)
#endif

/* <linux/pidfd.h>, Linux 6.11: the pid namespace of a pidfd's process. */
#ifndef PIDFD_GET_PID_NAMESPACE
#define PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5)
#endif

/* <linux/fs.h>, Linux 6.11: PROCMAP_QUERY, one mapping of a maps file
 * descriptor by address, with its file's device and inode and, on
 * request, its path. */
#ifndef PROCMAP_QUERY
struct procmap_query {
        uint64_t size;
        uint64_t query_flags;
        uint64_t query_addr;
        uint64_t vma_start;
        uint64_t vma_end;
        uint64_t vma_flags;
        uint64_t vma_page_size;
        uint64_t vma_offset;
        uint64_t inode;
        uint32_t dev_major;
        uint32_t dev_minor;
        uint32_t vma_name_size;
        uint32_t build_id_size;
        uint64_t vma_name_addr;
        uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#define PROCMAP_QUERY_FILE_BACKED_VMA 0x20
#endif

/* <linux/pidfd.h>, Linux 6.13: PIDFD_GET_INFO, a pidfd's process's ids and
 * credentials without procfs text.  The first version of the structure
 * (PIDFD_INFO_SIZE_VER0, 64 bytes), under names of our own: later kernels
 * grew it, and every kernel that has the ioctl takes any size from this
 * one up.  Kernels before 6.13 answer ENOTTY or EINVAL. */
struct cudackpt_pidfd_info {
        uint64_t mask;
        uint64_t cgroupid;
        uint32_t pid, tgid, ppid;
        uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        uint32_t spare0[1];
};
#define CUDACKPT_PIDFD_INFO_PID (1u << 0)
#define CUDACKPT_PIDFD_INFO_CREDS (1u << 1)
#define CUDACKPT_PIDFD_GET_INFO _IOWR(0xFF, 11, struct cudackpt_pidfd_info)

#endif
