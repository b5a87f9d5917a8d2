/* nimble-run as a function, so that the `nimble run` subcommand is the
 * same program: nimble_run_main(argc, argv, prog) parses argv (argv[0] is
 * the program or subcommand name), runs, prints to stdout and stderr with
 * `prog` ("nimble-run" when NULL) in its messages, and returns the exit
 * status nimble-run documents (0, 1 failure, 2 usage). */
#ifndef NIMBLE_RUN_TOOL_H
#define NIMBLE_RUN_TOOL_H

int nimble_run_main(int argc, char **argv, const char *prog);

#endif
