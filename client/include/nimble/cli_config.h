/* The `nimble` client's configuration: where the scheduler and the store
 * are, and the bearer token to present to them.
 *
 * A setting comes from, in increasing precedence: the built-in default, the
 * config file, the environment (NIMBLE_SCHEDULER, NIMBLE_STORE, NIMBLE_TOKEN)
 * and command-line flags. Each setting remembers where it came from, so
 * `nimble config` can say why a value is what it is.
 *
 *   nimble_cli_config cfg;
 *   nimble_cli_config_init(&cfg);
 *   s = nimble_cli_config_load_file(&cfg, path, must_exist);   // lowest first
 *   if (!s) s = nimble_cli_config_apply_env(&cfg);
 *   if (!s) s = nimble_cli_config_set(&cfg, "store", url, NIMBLE_CLI_SRC_FLAG, "--store");
 *   ...
 *   nimble_cli_config_deinit(&cfg);
 *
 * The file is plain text, one `key = value` per line; blank lines and lines
 * whose first non-blank character is `#` are ignored, as is the rest of a
 * line after ` #`. A value may be written in double quotes to keep a ` #`
 * in it (no setting accepts spaces or control characters). Unknown keys,
 * a key given twice and malformed lines are errors naming FILE:LINE.
 */
#ifndef NIMBLE_CLI_CONFIG_H
#define NIMBLE_CLI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a setting's value came from, lowest precedence first. */
typedef enum nimble_cli_source {
  NIMBLE_CLI_SRC_DEFAULT = 0,
  NIMBLE_CLI_SRC_FILE,
  NIMBLE_CLI_SRC_ENV,
  NIMBLE_CLI_SRC_FLAG,
} nimble_cli_source_t;

/* The settings, in the order `nimble config` lists them. */
typedef enum nimble_cli_key {
  NIMBLE_CLI_KEY_SCHEDULER = 0,
  NIMBLE_CLI_KEY_STORE,
  NIMBLE_CLI_KEY_TOKEN,
  NIMBLE_CLI_KEY_COUNT_
} nimble_cli_key_t;

#define NIMBLE_CLI_DEFAULT_SCHEDULER "tcp://127.0.0.1:5555"
#define NIMBLE_CLI_DEFAULT_STORE "http://127.0.0.1:5000"

/* Longest accepted config file line and value, in bytes. */
#define NIMBLE_CLI_CONFIG_MAX_LINE 4096

typedef struct nimble_cli_setting {
  char *value;              /* owned; NULL while the default applies (see _get) */
  nimble_cli_source_t source;
  char *origin;             /* owned: "FILE:LINE", "NIMBLE_STORE", "--store"; NULL for defaults */
} nimble_cli_setting_t;

typedef struct nimble_cli_config {
  nimble_cli_setting_t settings[NIMBLE_CLI_KEY_COUNT_];
  char *file;      /* owned: the config file consulted, NULL when none */
  bool file_read;  /* whether that file existed and was read */
} nimble_cli_config;

/* Fills caller-owned storage with the defaults. Pair with _deinit. */
void nimble_cli_config_init(nimble_cli_config *cfg);
void nimble_cli_config_deinit(nimble_cli_config *cfg);

/* "scheduler", "store", "token"; the environment variable for a key. */
const char *nimble_cli_config_key_name(nimble_cli_key_t key);
const char *nimble_cli_config_key_env(nimble_cli_key_t key);
/* The key named `name`; false when there is none. */
bool nimble_cli_config_key_from_name(const char *name, nimble_cli_key_t *out);
/* "default", "file", "environment", "flag". */
const char *nimble_cli_config_source_name(nimble_cli_source_t source);

/* The config file to read: `explicit_path` when non-NULL (a --config
 * flag), else $NIMBLE_CONFIG, else $XDG_CONFIG_HOME/nimble/config, else
 * $HOME/.config/nimble/config. *must_exist is true for the first two (a
 * file named on purpose that is missing is an error). *out is malloc'ed
 * (caller frees), NULL when no location can be formed (no HOME). */
nimble_status_t nimble_cli_config_locate(const char *explicit_path, char **out, bool *must_exist);

/* Sets `key` from `source` if `source` is at least as strong as the
 * current one. Values are checked (scheduler: tcp:// or ipc:// endpoint;
 * store: http:// or https:// URL; token: printable, no spaces); the error
 * names `origin`. Copies value and origin. */
nimble_status_t nimble_cli_config_set(nimble_cli_config *cfg, nimble_cli_key_t key,
                                      const char *value, nimble_cli_source_t source,
                                      const char *origin);

/* Parses a config file's text (`len` bytes, need not be NUL-terminated);
 * `name` prefixes errors ("NAME:LINE: ..."). */
nimble_status_t nimble_cli_config_parse(nimble_cli_config *cfg, const char *name,
                                        const char *text, size_t len);

/* Reads and parses the file at `path` and records it in cfg->file. A
 * missing file is NOT_FOUND when must_exist, otherwise fine. */
nimble_status_t nimble_cli_config_load_file(nimble_cli_config *cfg, const char *path,
                                            bool must_exist);

/* Applies NIMBLE_SCHEDULER, NIMBLE_STORE and NIMBLE_TOKEN when set and
 * non-empty. */
nimble_status_t nimble_cli_config_apply_env(nimble_cli_config *cfg);

/* The value of a key (borrowed; NULL when unset). */
const char *nimble_cli_config_get(const nimble_cli_config *cfg, nimble_cli_key_t key);

/* A token safe to print: "****" followed by its last four characters when
 * it has at least 16, "****" otherwise, "(unset)" for NULL. Writes into
 * buf (always NUL-terminated) and returns it. */
const char *nimble_cli_config_mask_token(const char *token, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_CLI_CONFIG_H */
