/* The address a daemon's HTTP endpoint listens on (--metrics HOST:PORT):
 * one parser for the scheduler and the workers, so the two accept and
 * refuse the same spellings. */
#ifndef NIMBLE_LISTEN_ADDRESS_H
#define NIMBLE_LISTEN_ADDRESS_H

#include <stddef.h>
#include <netdb.h>

#include "nimble/status.h"

/* Resolves "HOST:PORT" or "[IPv6]:PORT" (numeric port; 0 picks a free one)
 * for bind(). On success *out is getaddrinfo's list (free it with
 * freeaddrinfo) and, when host is not NULL, the host part without brackets
 * is copied into host[host_size]. `example` ("127.0.0.1:9090") is shown in
 * the error for a malformed address. INVALID_ARGUMENT names the address. */
nimble_status_t nimble_listen_address_resolve(const char *address, const char *example, char *host,
                                              size_t host_size, struct addrinfo **out);

#endif /* NIMBLE_LISTEN_ADDRESS_H */
