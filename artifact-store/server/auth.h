/* Bearer tokens for nimble-store: a file of allowed tokens, one per line,
 * '#' starting a comment line, surrounding blanks ignored. */
#ifndef NIMBLE_STORE_AUTH_H
#define NIMBLE_STORE_AUTH_H

#include <stddef.h>

#include "nimble/status.h"

typedef struct nimble_store_auth nimble_store_auth;

/* Loads the token file. INVALID_ARGUMENT when it holds no token (a store
 * whose writes nobody can make is a configuration mistake), NOT_FOUND or
 * IO_ERROR when it cannot be read. Caller frees with _destroy. */
nimble_status_t nimble_store_auth_load(const char *path, nimble_store_auth **out_auth);

/* Same, from text in memory (tests). */
nimble_status_t nimble_store_auth_parse(const char *text, size_t size,
                                        nimble_store_auth **out_auth);

void nimble_store_auth_destroy(nimble_store_auth *auth);

size_t nimble_store_auth_count(const nimble_store_auth *auth);

/* 1 when `authorization` (the header value, NULL when absent) is
 * "Bearer <token>" with a listed token. The comparison takes the same time
 * whichever token matches, or none: every listed token is compared, through
 * fixed-size digests, so neither a token's bytes nor its length leak. */
int nimble_store_auth_check(const nimble_store_auth *auth, const char *authorization);

#endif /* NIMBLE_STORE_AUTH_H */
