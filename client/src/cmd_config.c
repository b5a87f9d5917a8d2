/* `nimble config`: the effective configuration and where each value came
 * from. The token is masked; nothing here prints it in full. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json_text.h"

static const char *origin_text(const nimble_cli_setting_t *s, char *buf, size_t size) {
  if (s->source == NIMBLE_CLI_SRC_DEFAULT)
    snprintf(buf, size, "default");
  else
    snprintf(buf, size, "%s: %s", nimble_cli_config_source_name(s->source), s->origin);
  return buf;
}

static const char *shown_value(const nimble_cli_config *cfg, nimble_cli_key_t k, char *buf,
                               size_t size) {
  const char *v = nimble_cli_config_get(cfg, k);
  if (k == NIMBLE_CLI_KEY_TOKEN) return v ? nimble_cli_config_mask_token(v, buf, size) : NULL;
  return v;
}

static int print_json(const nimble_cli_config *cfg) {
  json_t *root = json_object(), *settings = json_object();
  json_object_set_new(root, "file", cfg->file ? nimble_cli_json_text(cfg->file) : json_null());
  json_object_set_new(root, "file_read", json_boolean(cfg->file_read));
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) {
    const nimble_cli_setting_t *s = &cfg->settings[k];
    char masked[64];
    const char *v = shown_value(cfg, (nimble_cli_key_t)k, masked, sizeof masked);
    json_t *o = json_object();
    json_object_set_new(o, "value", v ? nimble_cli_json_text(v) : json_null());
    json_object_set_new(o, "source",
                        nimble_cli_json_text(nimble_cli_config_source_name(s->source)));
    json_object_set_new(o, "origin", s->origin ? nimble_cli_json_text(s->origin) : json_null());
    if (k == NIMBLE_CLI_KEY_TOKEN) json_object_set_new(o, "masked", json_true());
    json_object_set_new(settings, nimble_cli_config_key_name((nimble_cli_key_t)k), o);
  }
  json_object_set_new(root, "settings", settings);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text) {
    fprintf(stderr, "nimble: out of memory\n");
    return NIMBLE_EXIT_FAILURE;
  }
  printf("%s\n", text);
  free(text);
  return NIMBLE_EXIT_OK;
}

/* Text output reads as a config file: "key = value  # where from". */
static int print_text(const nimble_cli_config *cfg) {
  if (!cfg->file)
    printf("# config file: none (neither XDG_CONFIG_HOME nor HOME is set)\n");
  else
    printf("# config file: %s%s\n", cfg->file, cfg->file_read ? "" : " (not found)");
  for (int k = 0; k < NIMBLE_CLI_KEY_COUNT_; k++) {
    const nimble_cli_setting_t *s = &cfg->settings[k];
    char masked[64], origin[600];
    const char *v = shown_value(cfg, (nimble_cli_key_t)k, masked, sizeof masked);
    const char *name = nimble_cli_config_key_name((nimble_cli_key_t)k);
    if (!v) {
      printf("# %s is not set\n", name);
      continue;
    }
    printf("%-9s = %-32s # %s\n", name, v, origin_text(s, origin, sizeof origin));
  }
  return NIMBLE_EXIT_OK;
}

static int run_config(nimble_cli_ctx *ctx, int argc, char **argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      nimble_cli_print_command_help(&nimble_cmd_config, stdout);
      return NIMBLE_EXIT_OK;
    } else if (argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
      return nimble_cli_usage_error(&nimble_cmd_config, "unknown option '%s'", argv[i]);
    } else if (strcmp(argv[i], "--") != 0) {
      return nimble_cli_usage_error(&nimble_cmd_config, "unexpected argument '%s'", argv[i]);
    }
  }
  int rc = nimble_cli_load_config(ctx);
  if (rc) return rc;
  return json ? print_json(&ctx->config) : print_text(&ctx->config);
}

const nimble_cli_command nimble_cmd_config = {
    "config",
    "Print the effective configuration and where each value came from.",
    "config [--json]",
    "Shows the scheduler, store and token settings after flags, environment\n"
    "(NIMBLE_SCHEDULER, NIMBLE_STORE, NIMBLE_TOKEN) and the config file are\n"
    "applied, each with its source: default, file (FILE:LINE), environment\n"
    "(the variable) or flag. The token is masked.\n"
    "\n"
    "Options:\n"
    "  --json   print one JSON object instead of text\n",
    run_config,
};
