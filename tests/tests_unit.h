/* Test cases of the test-unit binary that live in their own files. */
#pragma once

#include <check.h>

TCase *fw_unit_tcase(void);
TCase *fw_client_tcase(void);
TCase *mac_tcase(void);
TCase *policy_unit_tcase(void);
