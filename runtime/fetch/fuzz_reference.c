/* libFuzzer target for store references (reference.c): the text an
 * application or a user hands the fetcher, which becomes URL paths and
 * cache file names. Built with clang-16 by runtime/fetch/CMakeLists.txt
 * (`cmake --build BUILD --target fuzz_reference`) and run by
 * bench/fuzz/run.sh; tests/fuzz replays the corpus
 * (tests/fuzz/reference/corpus) through this same function in every build.
 * docs/reliability.md, "Fuzzing".
 *
 * The input's bytes up to its first NUL are the reference. The oracle is
 * the grammar docs/fetch.md gives ("Reference syntax"), written as a POSIX
 * regular expression plus the bounds a regex does not say (name at most
 * 255 bytes, tag at most 128, port 1 to 65535):
 *  - a reference the parser accepts matches the grammar, and its parts
 *    (base_url, name, tag, digest) put back together give the text;
 *  - a reference that matches the grammar (with a port of at most 5
 *    digits) is accepted;
 *  - a refusal is INVALID_ARGUMENT naming "reference", and leaves the
 *    struct zeroed.
 * Any violation aborts. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/fetch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *text, const char *what) {
  fprintf(stderr, "fuzz_reference: '%s': %s\n", text, what);
  abort();
}

#define NAME_COMPONENT "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*"
static const char kGrammar[] =
    "^https?://([A-Za-z0-9.-]+|\\[[A-Za-z0-9:.]+\\])(:[0-9]+)?/" NAME_COMPONENT
    "(/" NAME_COMPONENT ")*(:[A-Za-z0-9_][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$";

/* 1 when `text` is a reference by docs/fetch.md's grammar; *short_port is
 * 0 when its port has more than 5 digits (leading zeros). */
static int in_grammar(const char *text, int *short_port) {
  static regex_t re;
  static int compiled;
  if (!compiled) {
    if (regcomp(&re, kGrammar, REG_EXTENDED | REG_NOSUB) != 0) fail(kGrammar, "regcomp");
    compiled = 1;
  }
  *short_port = 1;
  if (regexec(&re, text, 0, NULL, 0) != 0) return 0;
  /* The grammar holds: the host has no '/', a name no ':' or '@', a tag no '@'. */
  const char *host = strstr(text, "://") + 3;
  const char *name = strchr(host, '/') + 1;
  const char *name_end = name + strcspn(name, ":@");
  if (name_end - name > 255) return 0;
  const char *digest = strchr(name_end, '@');
  if (*name_end == ':') {
    size_t tag_len = (size_t)((digest ? digest : name_end + strlen(name_end)) - (name_end + 1));
    if (tag_len > 128) return 0;
  } else if (!digest) {
    return 0; /* neither a tag nor a digest */
  }
  /* The port: after the host ("]:" for an IPv6 literal, else the first ':'). */
  const char *host_end = host[0] == '[' ? strchr(host, ']') + 1 : host + strcspn(host, ":/");
  if (*host_end == ':') {
    const char *p = host_end + 1;
    size_t digits = strspn(p, "0123456789");
    unsigned long port = 0;
    for (size_t i = 0; i < digits && port <= 65535; i++) port = port * 10 + (unsigned long)(p[i] - '0');
    if (port < 1 || port > 65535) return 0;
    if (digits > 5) *short_port = 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int short_port;
  int grammatical = in_grammar(text, &short_port);
  nimble_fetch_reference_t ref;
  nimble_status_t s = nimble_fetch_parse_reference(text, &ref);
  if (s) {
    if (nimble_status_code(s) != NIMBLE_INVALID_ARGUMENT) fail(text, "refused with a code other than INVALID_ARGUMENT");
    if (!strstr(nimble_status_message(s), "reference")) fail(text, "the error does not say reference");
    if (ref.base_url || ref.name || ref.tag || ref.digest) fail(text, "refused but left parts");
    if (grammatical && short_port) {
      fprintf(stderr, "fuzz_reference: %s\n", nimble_status_message(s));
      fail(text, "refused a reference the documented grammar allows");
    }
    nimble_status_free(s);
    free(text);
    return 0;
  }
  if (!grammatical) fail(text, "accepted a reference outside the documented grammar");
  if (!ref.base_url || !ref.name || (!ref.tag && !ref.digest)) fail(text, "a part is missing");
  if (!nimble_fetch_looks_like_reference(text)) fail(text, "accepted, but does not look like a reference");
  /* The parts put back together are the text. */
  size_t n = strlen(ref.base_url) + strlen(ref.name) + (ref.tag ? strlen(ref.tag) : 0) +
             (ref.digest ? strlen(ref.digest) : 0) + 4;
  char *back = malloc(n);
  if (!back) fail(text, "out of memory");
  snprintf(back, n, "%s/%s%s%s%s%s", ref.base_url, ref.name, ref.tag ? ":" : "",
           ref.tag ? ref.tag : "", ref.digest ? "@" : "", ref.digest ? ref.digest : "");
  if (strcmp(back, text) != 0) fail(text, "the parts do not put back together as the text");
  if (strchr(ref.base_url + 8, '/')) fail(text, "base_url holds a path");
  free(back);
  nimble_fetch_reference_deinit(&ref);
  if (ref.base_url || ref.name || ref.tag || ref.digest) fail(text, "deinit left parts");
  free(text);
  return 0;
}
