/* failure.c: a failed call said once (failure.h). */
#include "failure.h"

#include "describe.h"
#include "exitcode.h"

#include <stdio.h>
#include <stdlib.h>

int ctl_call_failed(const char *prefix, int r, const cudackpt_reply *reply, bool json) {
        char *text;

        if (r < 0) {
                fprintf(stderr, "%s%s\n", prefix, ctl_describe_call_failure(r));
                return ctl_call_failure_exit_code(r);
        }
        text = ctl_describe_error(reply);
        fprintf(stderr, "%s%s\n", prefix, text ? text : reply->error);
        free(text);
        if (json) {
                text = ctl_error_json(reply);
                if (text)
                        puts(text);
                free(text);
        }
        return ctl_reply_exit_code(reply);
}
