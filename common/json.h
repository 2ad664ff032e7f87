/* json.h: reading members of cJSON objects the daemon's replies (and the
 * client's own files) hold, strictly: a member of another kind, or a
 * number that is not an integer in range, reads as absent; and printing
 * and building them without leaking on a failed allocation.  Shared by
 * libcudackpt, cudackptctl and the daemon, so that every reply is read
 * alike. */
#ifndef CUDACKPT_COMMON_JSON_H
#define CUDACKPT_COMMON_JSON_H

#include <cJSON.h>

#include <stdbool.h>

/* 2^53: the largest integer below which every integer is exact in a double. */
#define JSON_MAX_EXACT 9007199254740992.0

/* The string of member key of o; NULL when absent or not a string. */
const char *json_get_string(const cJSON *o, const char *key);

/* Whether item is a number that is an integer within [min, max] (finite:
 * 1e300 or 3.5 never reach a conversion to an integer type). */
bool json_is_integer(const cJSON *item, double min, double max);

/* Member key of o, when json_is_integer(member, min, max), into *ret_value;
 * false (and *ret_value untouched) otherwise. */
bool json_get_integer(const cJSON *o, const char *key, double min, double max, long long *ret_value);

/* Member key of o, when a number, into *ret_value; false otherwise. */
bool json_get_number(const cJSON *o, const char *key, double *ret_value);

/* Member key of o, when a boolean, into *ret_value; false otherwise. */
bool json_get_bool(const cJSON *o, const char *key, bool *ret_value);

/* o as unformatted JSON text in plain malloc() memory (to free()),
 * whatever allocator hooks cJSON was given; NULL when out of memory. */
char *json_print_dup(const cJSON *o);
/* The same with a newline at the end: the text of a file. */
char *json_print_line(const cJSON *o);

/* Adds item to the array arr, or deletes it: false when item is NULL (an
 * allocation failed making it) or could not be added. */
bool json_add_to_array(cJSON *arr, cJSON *item);

#endif
