/* runner.c: main() of every unit test program (see runner.h). */
#include <stdlib.h>

#include "runner.h"

int main(void)
{
        Suite *s = suite_create(unit_suite_name);
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        unit_tests(tc);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
