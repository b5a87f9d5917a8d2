/* The nimble-run executable: everything is in nimble_run.c. */
#include "nimble_run.h"

int main(int argc, char **argv) { return nimble_run_main(argc, argv, "nimble-run"); }
