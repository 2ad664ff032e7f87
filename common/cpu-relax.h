/* cpu-relax.h: one pause of a busy-wait loop, for the daemon's lane and
 * the client library's spinning reads.  It tells the CPU that this thread
 * only waits (a sibling hyperthread gets the core meanwhile), without a
 * system call; elsewhere than x86 and arm64 the loop just goes round. */
#ifndef CUDACKPT_CPU_RELAX_H
#define CUDACKPT_CPU_RELAX_H

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
