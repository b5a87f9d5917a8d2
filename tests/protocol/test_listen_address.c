/* The daemons' HTTP listening address (--metrics HOST:PORT): what resolves,
 * to which address, and the errors for what does not. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "nimble_test.h"

#include "nimble/listen_address.h"

START_TEST(test_an_ipv4_address_resolves_to_that_address_and_port) {
  char host[64];
  struct addrinfo *res = NULL;
  ck_assert_ptr_null(nimble_listen_address_resolve("127.0.0.1:9090", "x", host, sizeof host, &res));
  ck_assert_ptr_nonnull(res);
  ck_assert_str_eq(host, "127.0.0.1");
  ck_assert_int_eq(res->ai_family, AF_INET);
  const struct sockaddr_in *sa = (const struct sockaddr_in *)res->ai_addr;
  ck_assert_uint_eq(ntohs(sa->sin_port), 9090);
  ck_assert_uint_eq(ntohl(sa->sin_addr.s_addr), 0x7f000001u);
  freeaddrinfo(res);
}
END_TEST

START_TEST(test_a_bracketed_ipv6_address_loses_its_brackets) {
  char host[64];
  struct addrinfo *res = NULL;
  ck_assert_ptr_null(nimble_listen_address_resolve("[::1]:0", "x", host, sizeof host, &res));
  ck_assert_str_eq(host, "::1");
  ck_assert_int_eq(res->ai_family, AF_INET6);
  const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)res->ai_addr;
  ck_assert_uint_eq(ntohs(sa->sin6_port), 0);
  ck_assert(IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr));
  freeaddrinfo(res);
}
END_TEST

START_TEST(test_malformed_addresses_are_refused_naming_them) {
  struct addrinfo *res = (struct addrinfo *)1;
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve("9090", "127.0.0.1:9090", NULL, 0, &res),
                      NIMBLE_INVALID_ARGUMENT, "'9090': expected HOST:PORT, e.g. 127.0.0.1:9090");
  ck_assert_ptr_null(res);
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve(":9090", "e", NULL, 0, &res), NIMBLE_INVALID_ARGUMENT,
                      "':9090': expected HOST:PORT");
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve("127.0.0.1:", "e", NULL, 0, &res),
                      NIMBLE_INVALID_ARGUMENT, "'127.0.0.1:': expected HOST:PORT");
  /* A service name is not a port: AI_NUMERICSERV. */
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve("127.0.0.1:http", "e", NULL, 0, &res),
                      NIMBLE_INVALID_ARGUMENT, "'127.0.0.1:http': ");
  char longhost[400];
  memset(longhost, 'a', 300);
  strcpy(longhost + 300, ":1");
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve(longhost, "e", NULL, 0, &res), NIMBLE_INVALID_ARGUMENT,
                      "host too long");
  char small[4];
  NIMBLE_ASSERT_ERROR(nimble_listen_address_resolve("127.0.0.1:1", "e", small, sizeof small, &res),
                      NIMBLE_INVALID_ARGUMENT, "host too long");
  ck_assert_ptr_null(res);
}
END_TEST

int main(void) {
  Suite *s = suite_create("listen_address");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_an_ipv4_address_resolves_to_that_address_and_port);
  tcase_add_test(tc, test_a_bracketed_ipv6_address_loses_its_brackets);
  tcase_add_test(tc, test_malformed_addresses_are_refused_naming_them);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
