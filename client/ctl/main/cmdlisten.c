/* cmdlisten.c: the options of metrics --listen with a number (cmdline.h):
 * --request-deadline, --max-per-address, and the groups of addresses the
 * latter counts by, --ipv4-prefix and --ipv6-prefix (addrgroup.h). */
#include "cmdline.h"
#include "args.h"
#include "exitcode.h"

#include <limits.h>

int ctl_option_listen(ctl_args *a, ctl_listen_option o, const char *arg) {
        unsigned long long v;

        switch (o) {
        case CTL_LISTEN_REQUEST_DEADLINE:
                if (ctl_parse_uint(arg, INT_MAX, &v) < 0 || v == 0)
                        return ctl_usage_error("invalid --request-deadline '%s': expected milliseconds, "
                                               "1..2147483647", arg);
                a->request_deadline = (long long) v;
                break;
        case CTL_LISTEN_MAX_PER_ADDRESS:
                if (ctl_parse_uint(arg, UINT_MAX, &v) < 0 || v == 0)
                        return ctl_usage_error("invalid --max-per-address '%s': expected a number, 1..%u",
                                               arg, UINT_MAX);
                a->max_per_address = (unsigned) v;
                break;
        case CTL_LISTEN_IPV4_PREFIX:
                if (ctl_parse_uint(arg, 32, &v) < 0)
                        return ctl_usage_error("invalid --ipv4-prefix '%s': expected a prefix length, 0..32", arg);
                a->ipv4_prefix = (int) v;
                break;
        case CTL_LISTEN_IPV6_PREFIX:
                if (ctl_parse_uint(arg, 128, &v) < 0)
                        return ctl_usage_error("invalid --ipv6-prefix '%s': expected a prefix length, 0..128", arg);
                a->ipv6_prefix = (int) v;
                break;
        }
        return -1;
}

bool ctl_listen_options_given(const ctl_args *a) {
        return a->request_deadline || a->max_per_address || a->ipv4_prefix >= 0 || a->ipv6_prefix >= 0;
}
