/* libclient.h: what the rooms of libcudackpt share beyond the public API
 * (include/cudackpt/client.h): the connection (client.c) makes calls, and
 * decodes each reply through reply.c; the typed methods (methods.c) are
 * calls with parameters built as JSON.  Hidden: nothing here leaves the
 * shared object. */
#ifndef CUDACKPT_LIBCLIENT_H
#define CUDACKPT_LIBCLIENT_H

#include <cudackpt/client.h>

#include <cJSON.h>

/* Call method with params (owned: freed whatever happens; NULL for {})
 * and read its one reply into *ret_reply, as cudackpt_call() does. */
int client_call_params(cudackpt_client *c, const char *method, cJSON *params, cudackpt_reply *ret_reply);

/* Decode one reply message (len bytes, NUL excluded) into *ret_reply.
 * ret_continues NULL: a call without "more", for which a reply with
 * "continues": true is out of protocol.  Otherwise *ret_continues says
 * whether more replies follow this one. */
int client_reply_decode(const char *msg, size_t len, cudackpt_reply *ret_reply, int *ret_continues);

#endif
