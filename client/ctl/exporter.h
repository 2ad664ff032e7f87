/* exporter.h: metrics --listen, a Prometheus exporter over HTTP. */
#ifndef CUDACKPT_CTL_EXPORTER_H
#define CUDACKPT_CTL_EXPORTER_H

/* metrics --listen: serve GET /metrics over HTTP, one GetMetrics call per
 * scrape, until SIGTERM or SIGINT; returns the exit status. */
typedef struct ctl_exporter {
        const char *prefix;             /* "cudackptctl: metrics: " */
        const char *socket;             /* the daemon's socket */
        const char *listen;             /* ":PORT", "IPV4:PORT" or "[IPV6]:PORT" */
        int timeout_ms;                 /* each GetMetrics call's limit, > 0 */
        long long deadline_ms;          /* for a request to arrive (from the connection's
                                         * opening or the previous answer) and to be
                                         * answered (from its arrival); > timeout_ms */
        unsigned per_address;           /* connections at once from one group of
                                         * addresses (addrgroup.h), > 0 */
        unsigned ipv4_prefix;           /* the groups: bits of an IPv4 address, 0..32, */
        unsigned ipv6_prefix;           /* of an IPv6 one, 0..128 (loopback: one group) */
} ctl_exporter;

int ctl_exporter_run(const ctl_exporter *e);

#endif
