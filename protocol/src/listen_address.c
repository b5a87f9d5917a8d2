/* nimble/listen_address.h: HOST:PORT → getaddrinfo, for bind(). */
#include "nimble/listen_address.h"

#include <string.h>
#include <sys/socket.h>

nimble_status_t nimble_listen_address_resolve(const char *address, const char *example, char *host,
                                              size_t host_size, struct addrinfo **out) {
  *out = NULL;
  const char *colon = strrchr(address, ':');
  if (!colon || colon == address || !colon[1])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s': expected HOST:PORT, e.g. %s", address, example);
  char name[256];
  size_t hl = (size_t)(colon - address);
  const char *hs = address;
  if (hs[0] == '[' && hl >= 2 && hs[hl - 1] == ']') { /* [IPv6]:PORT */
    hs++;
    hl -= 2;
  }
  if (hl >= sizeof name) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s': host too long", address);
  memcpy(name, hs, hl);
  name[hl] = '\0';
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(name, colon + 1, &hints, out);
  if (rc != 0) {
    *out = NULL;
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s': %s", address, gai_strerror(rc));
  }
  if (host) {
    if (hl >= host_size) {
      freeaddrinfo(*out);
      *out = NULL;
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s': host too long", address);
    }
    memcpy(host, name, hl + 1);
  }
  return nimble_ok();
}
