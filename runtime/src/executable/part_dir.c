/* The part files of a directory, as `nimble fetch -o DIR` writes them (one
 * file per layer beside manifest.json and config.json). Shared by
 * nimble-run, which loads such a directory, and `nimble fetch -o
 * FILE.nimble`, which joins one into a file. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/runtime.h"

/* Reads `path` whole into *data (malloc'ed). */
static nimble_status_t read_whole(const char *path, size_t size, void **data) {
  FILE *f = fopen(path, "rb");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path, strerror(errno));
  void *buf = malloc(size ? size : 1);
  if (!buf) {
    fclose(f);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes", path, size);
  }
  if (fread(buf, 1, size, f) != size) {
    free(buf);
    fclose(f);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot read %zu bytes", path, size);
  }
  fclose(f);
  *data = buf;
  return nimble_ok();
}

void nimble_executable_parts_free(nimble_executable_part_t *parts, size_t num_parts) {
  if (!parts) return;
  for (size_t i = 0; i < num_parts; i++) free((void *)parts[i].data);
  free(parts);
}

nimble_status_t nimble_executable_read_part_dir(const char *dir, nimble_executable_part_t **out,
                                                size_t *num_parts) {
  *out = NULL;
  *num_parts = 0;
  DIR *d = opendir(dir);
  if (!d) return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", dir, strerror(errno));
  nimble_executable_part_t *parts = calloc(NIMBLE_MAX_SECTIONS, sizeof *parts);
  if (!parts) {
    closedir(d);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", dir);
  }
  size_t n = 0;
  nimble_status_t s = nimble_ok();
  struct dirent *e;
  while (!s && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s/%s: the path is too long", dir, e->d_name);
      break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < NIMBLE_PART_HEADER_SIZE) continue;
    void *data = NULL;
    s = read_whole(path, (size_t)st.st_size, &data);
    if (s) break;
    if (memcmp(data, NIMBLE_PART_MAGIC, 4) != 0) { /* manifest.json, config.json, ... */
      free(data);
      continue;
    }
    if (n == NIMBLE_MAX_SECTIONS) {
      free(data);
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: more than %d part files", dir, NIMBLE_MAX_SECTIONS);
      break;
    }
    parts[n].kind = (nimble_part_kind_t)nimble_get_u32((const uint8_t *)data + 4);
    parts[n].data = data;
    parts[n].size = (size_t)st.st_size;
    n++;
  }
  closedir(d);
  if (!s && n == 0)
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "%s: no part files (files that start with a part header, %s)", dir, NIMBLE_PART_MAGIC);
  if (s) {
    nimble_executable_parts_free(parts, n);
    return s;
  }
  /* Kind order (the compiler's section order), not readdir's. */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && parts[j].kind < parts[j - 1].kind; j--) {
      nimble_executable_part_t t = parts[j];
      parts[j] = parts[j - 1];
      parts[j - 1] = t;
    }
  *out = parts;
  *num_parts = n;
  return nimble_ok();
}
