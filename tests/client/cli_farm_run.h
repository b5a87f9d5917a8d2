/* The client suites that run `nimble` against a loopback farm
 * (tests/scheduler/farm_harness.h). */
#ifndef NIMBLE_TESTS_CLI_FARM_RUN_H
#define NIMBLE_TESTS_CLI_FARM_RUN_H

#include "cli_run.h"
#include "farm_harness.h"

/* Runs `nimble --scheduler EP --store URL --token TOKEN ARGS...` against
 * farm f (args NULL-terminated, at most 30), with NIMBLE_EVENTS set to the
 * farm's events endpoint: it is bound to a random port, not the
 * scheduler's port + 2 that submit would guess. */
cli_result cli_run_on_farm(farm *f, const char *token, const char *const *args);

#endif
