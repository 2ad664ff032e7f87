/* Unit tests: GPU UUID spellings accepted and refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#include "varlink/uuid.h"

static const unsigned char want[16] = { 0x5e, 0xe1, 0xa5, 0xe1, 0x01, 0x23, 0x45, 0x67,
                                        0x89, 0xab, 0xcd, 0xef, 0x00, 0x11, 0x22, 0x33 };

START_TEST(test_accepted)
{
        static const char *ok[] = {
                "GPU-5ee1a5e1-0123-4567-89ab-cdef00112233",
                "gpu-5EE1A5E1-0123-4567-89AB-CDEF00112233",
                "5ee1a5e10123456789abcdef00112233",
                "5ee1a5e1-0123-4567-89ab-cdef00112233",
                "5e-e1a5e10123456789abcdef00112233",
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                CUuuid u;
                ck_assert_msg(uuid_parse(ok[i], &u) == 0, "refused %s", ok[i]);
                ck_assert_mem_eq(u.bytes, want, 16);
        }
}
END_TEST

START_TEST(test_refused)
{
        static const char *bad[] = {
                "", "GPU-", "GPU-5ee1a5e10123456789abcdef00112233", /* prefix needs 8-4-4-4-12 */
                "GPU-5ee1a5e1-0123-4567-89abc-def00112233", "5ee1a5e10123456789abcdef0011223",
                "5ee1a5e10123456789abcdef001122334", "-5ee1a5e10123456789abcdef00112233",
                "5ee1a5e10123456789abcdef00112233-", "5ee1a5e1--0123456789abcdef00112233",
                "5ee1a5e10123456789abcdef0011223g", "MIG-5ee1a5e1-0123-4567-89ab-cdef00112233",
                " 5ee1a5e10123456789abcdef00112233",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                CUuuid u;
                ck_assert_msg(uuid_parse(bad[i], &u) < 0, "accepted '%s'", bad[i]);
        }
        ck_assert_int_lt(uuid_parse(NULL, &(CUuuid){ 0 }), 0);
}
END_TEST

START_TEST(test_format_round_trip)
{
        char s[UUID_STRING_MAX];
        CUuuid u, v;

        memcpy(u.bytes, want, 16);
        uuid_format(&u, s);
        ck_assert_str_eq(s, "GPU-5ee1a5e1-0123-4567-89ab-cdef00112233");
        ck_assert_int_eq(uuid_parse(s, &v), 0);
        ck_assert(uuid_equal(&u, &v));
}
END_TEST

const char unit_suite_name[] = "uuid";

void unit_tests(TCase *tc)
{
        tcase_add_test(tc, test_accepted);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_format_round_trip);
}
