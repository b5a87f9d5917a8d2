/* The client's configuration: defaults, config file, environment, flags. */
#include "nimble/cli_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
  const char *name;
  const char *env;
  const char *default_value;
} kKeys[NIMBLE_CLI_KEY_COUNT_] = {
    [NIMBLE_CLI_KEY_SCHEDULER] = {"scheduler", "NIMBLE_SCHEDULER", NIMBLE_CLI_DEFAULT_SCHEDULER},
    [NIMBLE_CLI_KEY_STORE] = {"store", "NIMBLE_STORE", NIMBLE_CLI_DEFAULT_STORE},
    [NIMBLE_CLI_KEY_TOKEN] = {"token", "NIMBLE_TOKEN", NULL},
};

/* Files larger than this are not config files; reading stops before it. */
#define MAX_CONFIG_FILE (1u << 20)

const char *nimble_cli_config_key_name(nimble_cli_key_t key) {
  return key < NIMBLE_CLI_KEY_COUNT_ ? kKeys[key].name : "?";
}

const char *nimble_cli_config_key_env(nimble_cli_key_t key) {
  return key < NIMBLE_CLI_KEY_COUNT_ ? kKeys[key].env : "?";
}

bool nimble_cli_config_key_from_name(const char *name, nimble_cli_key_t *out) {
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) {
    if (strcmp(name, kKeys[k].name) == 0) {
      *out = (nimble_cli_key_t)k;
      return true;
    }
  }
  return false;
}

const char *nimble_cli_config_source_name(nimble_cli_source_t source) {
  switch (source) {
    case NIMBLE_CLI_SRC_DEFAULT: return "default";
    case NIMBLE_CLI_SRC_FILE: return "file";
    case NIMBLE_CLI_SRC_ENV: return "environment";
    case NIMBLE_CLI_SRC_FLAG: return "flag";
  }
  return "?";
}

void nimble_cli_config_init(nimble_cli_config *cfg) {
  /* Every setting starts as its default: value NULL (nimble_cli_config_get
   * then answers the built-in default), so deinit frees only what
   * nimble_cli_config_set allocated. */
  memset(cfg, 0, sizeof *cfg);
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) cfg->settings[k].source = NIMBLE_CLI_SRC_DEFAULT;
}

void nimble_cli_config_deinit(nimble_cli_config *cfg) {
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) {
    free(cfg->settings[k].value);
    free(cfg->settings[k].origin);
  }
  free(cfg->file);
  memset(cfg, 0, sizeof *cfg);
}

const char *nimble_cli_config_get(const nimble_cli_config *cfg, nimble_cli_key_t key) {
  if (key >= NIMBLE_CLI_KEY_COUNT_) return NULL;
  if (cfg->settings[key].value) return cfg->settings[key].value;
  return kKeys[key].default_value;
}

const char *nimble_cli_config_mask_token(const char *token, char *buf, size_t size) {
  if (size == 0) return buf;
  if (!token) {
    snprintf(buf, size, "(unset)");
  } else {
    size_t n = strlen(token);
    /* Short tokens would give away too large a fraction of themselves. */
    if (n >= 16)
      snprintf(buf, size, "****%s", token + n - 4);
    else
      snprintf(buf, size, "****");
  }
  return buf;
}

static bool has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Checks a value before it is accepted, so a typo is reported where it was
 * made (file line, variable or flag) rather than when a command first uses
 * it. */
static nimble_status_t check_value(nimble_cli_key_t key, const char *value, const char *origin) {
  const char *name = kKeys[key].name;
  if (value[0] == '\0')
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty value for '%s'", origin, name);
  for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
    if (*p < 0x21 || *p == 0x7f)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: '%s' must not contain spaces or control characters",
                                origin, name);
  }
  switch (key) {
    case NIMBLE_CLI_KEY_SCHEDULER:
      if ((has_prefix(value, "tcp://") && value[6]) || (has_prefix(value, "ipc://") && value[6]))
        return nimble_ok();
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: scheduler must be a tcp://HOST:PORT or ipc://PATH "
                                "endpoint, got '%s'",
                                origin, value);
    case NIMBLE_CLI_KEY_STORE:
      if ((has_prefix(value, "http://") && value[7]) || (has_prefix(value, "https://") && value[8]))
        return nimble_ok();
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: store must be an http:// or https:// URL, got '%s'", origin,
                                value);
    case NIMBLE_CLI_KEY_TOKEN:
    case NIMBLE_CLI_KEY_COUNT_: break;
  }
  return nimble_ok();
}

nimble_status_t nimble_cli_config_set(nimble_cli_config *cfg, nimble_cli_key_t key,
                                      const char *value, nimble_cli_source_t source,
                                      const char *origin) {
  if (key >= NIMBLE_CLI_KEY_COUNT_ || !value)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "config: bad key or value");
  if (!origin) origin = nimble_cli_config_source_name(source);
  NIMBLE_RETURN_IF_ERROR(check_value(key, value, origin));
  nimble_cli_setting_t *s = &cfg->settings[key];
  if (source < s->source) return nimble_ok();
  char *v = strdup(value);
  char *o = strdup(origin);
  if (!v || !o) {
    free(v);
    free(o);
    return NIMBLE_OOM();
  }
  free(s->value);
  free(s->origin);
  s->value = v;
  s->origin = o;
  s->source = source;
  return nimble_ok();
}

nimble_status_t nimble_cli_config_locate(const char *explicit_path, char **out, bool *must_exist) {
  *out = NULL;
  *must_exist = false;
  const char *env = getenv("NIMBLE_CONFIG");
  char *path = NULL;
  if (explicit_path || (env && env[0])) {
    path = strdup(explicit_path ? explicit_path : env);
    *must_exist = true;
  } else {
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    /* The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be
     * ignored. */
    if (xdg && xdg[0] == '/') {
      if (asprintf(&path, "%s/nimble/config", xdg) < 0) path = NULL;
    } else if (home && home[0]) {
      if (asprintf(&path, "%s/.config/nimble/config", home) < 0) path = NULL;
    } else {
      return nimble_ok();
    }
  }
  if (!path) return NIMBLE_OOM();
  *out = path;
  return nimble_ok();
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Parses one line (NUL-terminated, without its newline) into cfg. */
static nimble_status_t parse_line(nimble_cli_config *cfg, const char *name, size_t lineno,
                                  char *line, size_t first_line[NIMBLE_CLI_KEY_COUNT_]) {
  char *p = line;
  while (is_blank(*p)) p++;
  if (*p == '\0' || *p == '#') return nimble_ok();

  char *key = p;
  while (*p && *p != '=' && !is_blank(*p)) p++;
  char *key_end = p;
  while (is_blank(*p)) p++;
  if (*p != '=' || key_end == key)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s:%zu: expected 'key = value', found '%s'", name, lineno, key);
  *key_end = '\0';
  p++;
  while (is_blank(*p)) p++;

  char *value = p, *value_end;
  if (*p == '"') {
    value = ++p;
    while (*p && *p != '"') p++;
    if (*p != '"')
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s:%zu: unterminated quoted value",
                                name, lineno);
    value_end = p++;
    while (is_blank(*p)) p++;
    if (*p && *p != '#')
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s:%zu: unexpected text after the quoted value: '%s'", name,
                                lineno, p);
  } else {
    /* An unquoted value ends at " #" (a comment) or the end of the line. */
    while (*p && !(*p == '#' && p > value && is_blank(p[-1]))) p++;
    value_end = p;
    while (value_end > value && is_blank(value_end[-1])) value_end--;
  }
  *value_end = '\0';

  nimble_cli_key_t k;
  if (!nimble_cli_config_key_from_name(key, &k))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s:%zu: unknown key '%s' (known keys: scheduler, store, token)",
                              name, lineno, key);
  if (first_line[k])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s:%zu: '%s' is set twice (first at line %zu)", name, lineno, key,
                              first_line[k]);
  first_line[k] = lineno;

  char origin[512];
  snprintf(origin, sizeof origin, "%s:%zu", name, lineno);
  return nimble_cli_config_set(cfg, k, value, NIMBLE_CLI_SRC_FILE, origin);
}

nimble_status_t nimble_cli_config_parse(nimble_cli_config *cfg, const char *name,
                                        const char *text, size_t len) {
  char *line = malloc(NIMBLE_CLI_CONFIG_MAX_LINE + 1);
  if (!line) return NIMBLE_OOM();
  size_t first_line[NIMBLE_CLI_KEY_COUNT_] = {0};
  size_t lineno = 0, pos = 0;
  nimble_status_t s = nimble_ok();
  while (!s && pos < len) {
    lineno++;
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t n = (nl ? (size_t)(nl - text) : len) - pos;
    if (n > NIMBLE_CLI_CONFIG_MAX_LINE) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s:%zu: line longer than %d bytes", name,
                             lineno, NIMBLE_CLI_CONFIG_MAX_LINE);
      break;
    }
    if (memchr(text + pos, '\0', n)) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "%s:%zu: NUL byte (this is not a text file)", name, lineno);
      break;
    }
    memcpy(line, text + pos, n);
    line[n] = '\0';
    s = parse_line(cfg, name, lineno, line, first_line);
    pos += n + (nl ? 1 : 0);
  }
  free(line);
  return s;
}

nimble_status_t nimble_cli_config_load_file(nimble_cli_config *cfg, const char *path,
                                            bool must_exist) {
  free(cfg->file);
  cfg->file = strdup(path);
  cfg->file_read = false;
  if (!cfg->file) return NIMBLE_OOM();

  FILE *f = fopen(path, "rb");
  if (!f) {
    int err = errno;
    if (err == ENOENT && !must_exist) return nimble_ok();
    return nimble_status_make(err == ENOENT ? NIMBLE_NOT_FOUND : NIMBLE_IO_ERROR,
                              "config file %s: %s", path, strerror(err));
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "config file %s: is a directory", path);
  }
  char *buf = malloc(MAX_CONFIG_FILE + 1);
  if (!buf) {
    fclose(f);
    return NIMBLE_OOM();
  }
  size_t n = fread(buf, 1, MAX_CONFIG_FILE + 1, f);
  int read_error = ferror(f);
  fclose(f);
  nimble_status_t s = nimble_ok();
  if (read_error)
    s = nimble_status_make(NIMBLE_IO_ERROR, "config file %s: read error", path);
  else if (n > MAX_CONFIG_FILE)
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "config file %s: larger than %u bytes", path,
                           MAX_CONFIG_FILE);
  else
    s = nimble_cli_config_parse(cfg, path, buf, n);
  free(buf);
  if (!s) cfg->file_read = true;
  return s;
}

nimble_status_t nimble_cli_config_apply_env(nimble_cli_config *cfg) {
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) {
    const char *v = getenv(kKeys[k].env);
    if (!v || !v[0]) continue;
    NIMBLE_RETURN_IF_ERROR(
        nimble_cli_config_set(cfg, (nimble_cli_key_t)k, v, NIMBLE_CLI_SRC_ENV, kKeys[k].env));
  }
  return nimble_ok();
}
