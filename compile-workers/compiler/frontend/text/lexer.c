/* The .nir lexer: identifiers, %locals, @globals, numbers, strings and
 * punctuation; // and block comments are skipped. */
#include "frontend/text/lexer.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
  const char *file;
  const char *p, *end;
  uint32_t line, col;
  nir_token *toks;
  size_t n, cap;
} lexer;

static nimble_status_t lex_error(lexer *lx, uint32_t line, uint32_t col, const char *msg) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s:%u:%u: %s", lx->file, line, col, msg);
}

static void advance(lexer *lx, size_t k) {
  for (size_t i = 0; i < k && lx->p < lx->end; i++) {
    if (*lx->p == '\n') {
      lx->line++;
      lx->col = 1;
    } else {
      lx->col++;
    }
    lx->p++;
  }
}

static bool push(lexer *lx, nir_tok_kind kind, const char *text, size_t len, uint32_t line, uint32_t col) {
  if (lx->n == lx->cap) {
    size_t cap = lx->cap ? lx->cap * 2 : 256;
    nir_token *t = realloc(lx->toks, cap * sizeof(*t));
    if (!t) return false;
    lx->toks = t;
    lx->cap = cap;
  }
  lx->toks[lx->n++] = (nir_token){kind, text, len, line, col};
  return true;
}

static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Reads "..." at s (s[0] == '"') with escapes \\ \" \n \xNN into an
 * arena string; *consumed counts the bytes including both quotes. Returns
 * NULL with *why set on a malformed string. */
static char *lex_quoted(nimble_arena *arena, const char *s, const char *end, size_t *consumed,
                        size_t *out_len, const char **why) {
  size_t k = 1, n = 0, span = 1;
  /* Measure first: the name is no longer than its quoted form. */
  while (s + span < end && s[span] != '"' && s[span] != '\n') span += s[span] == '\\' ? 2 : 1;
  char *buf = nimble_arena_alloc(arena, span);
  if (!buf) {
    *why = "out of memory";
    return NULL;
  }
  while (s + k < end && s[k] != '"' && s[k] != '\n') {
    char c = s[k++];
    if (c == '\\') {
      if (s + k >= end) break;
      char e = s[k++];
      if (e == 'n') c = '\n';
      else if (e == 'x') {
        int v = 0;
        for (int i = 0; i < 2; i++, k++) {
          char h = s + k < end ? s[k] : 0;
          int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) {
            *why = "bad \\x escape in a quoted name";
            return NULL;
          }
          v = v * 16 + d;
        }
        if (v == 0) {
          *why = "a quoted name cannot contain \\x00";
          return NULL;
        }
        c = (char)v;
      } else {
        c = e;
      }
    }
    buf[n++] = c;
  }
  if (s + k >= end || s[k] != '"') {
    *why = "unterminated quoted name";
    return NULL;
  }
  if (n == 0) {
    *why = "empty quoted name";
    return NULL;
  }
  buf[n] = '\0';
  *consumed = k + 1;
  *out_len = n;
  return buf;
}

nimble_status_t nir_lex(nimble_arena *arena, const char *file, const char *text, size_t len,
                        nir_token **out, size_t *n) {
  lexer lx = {file ? file : "<input>", text, text + len, 1, 1, NULL, 0, 0};
  nimble_status_t st = nimble_ok();
  bool after_dot = false;
  while (!st) {
    /* Whitespace and comments. */
    while (lx.p < lx.end) {
      if (isspace((unsigned char)*lx.p)) {
        advance(&lx, 1);
      } else if (lx.end - lx.p >= 2 && lx.p[0] == '/' && lx.p[1] == '/') {
        while (lx.p < lx.end && *lx.p != '\n') advance(&lx, 1);
      } else if (lx.end - lx.p >= 2 && lx.p[0] == '/' && lx.p[1] == '*') {
        uint32_t l = lx.line, c = lx.col;
        advance(&lx, 2);
        while (lx.p < lx.end && !(lx.end - lx.p >= 2 && lx.p[0] == '*' && lx.p[1] == '/')) advance(&lx, 1);
        if (lx.p >= lx.end) {
          st = lex_error(&lx, l, c, "unterminated comment");
          break;
        }
        advance(&lx, 2);
      } else {
        break;
      }
    }
    if (st) break;
    uint32_t line = lx.line, col = lx.col;
    const char *s = lx.p;
    if (lx.p >= lx.end) {
      if (!push(&lx, NIR_EOF, s, 0, line, col)) st = NIMBLE_OOM();
      break;
    }
    char c = *lx.p;
    nir_tok_kind kind;
    size_t k = 1;
    bool was_dot = after_dot;
    after_dot = false;
    if ((c == '%' || c == '@') && lx.p + 1 < lx.end && lx.p[1] == '"') {
      size_t used, nlen;
      const char *why = NULL;
      char *name = lex_quoted(arena, lx.p + 1, lx.end, &used, &nlen, &why);
      if (!name) {
        st = lex_error(&lx, line, col, why);
        break;
      }
      advance(&lx, used + 1);
      if (!push(&lx, c == '%' ? NIR_LOCAL : NIR_GLOBAL, name, nlen, line, col)) goto nomem;
      continue;
    }
    if (c == '%' || c == '@') {
      while (lx.p + k < lx.end && is_ident_char(lx.p[k])) k++;
      if (k == 1) {
        st = lex_error(&lx, line, col, c == '%' ? "expected a variable name after '%'" : "expected a name after '@'");
        break;
      }
      advance(&lx, k);
      if (!push(&lx, c == '%' ? NIR_LOCAL : NIR_GLOBAL, s + 1, k - 1, line, col)) goto nomem;
      continue;
    }
    if (is_ident_start(c)) {
      while (lx.p + k < lx.end && is_ident_char(lx.p[k])) k++;
      advance(&lx, k);
      if (!push(&lx, NIR_IDENT, s, k, line, col)) goto nomem;
      continue;
    }
    bool neg = c == '-' && lx.p + 1 < lx.end && isdigit((unsigned char)lx.p[1]);
    if (c == '-' && lx.end - lx.p >= 4 && memcmp(lx.p, "-inf", 4) == 0 &&
        !(lx.p + 4 < lx.end && is_ident_char(lx.p[4]))) {
      advance(&lx, 4);
      if (!push(&lx, NIR_FLOAT, s, 4, line, col)) goto nomem;
      continue;
    }
    if (isdigit((unsigned char)c) || neg) {
      kind = NIR_INT;
      k = neg ? 1 : 0;
      if (!was_dot && lx.end - (lx.p + k) >= 2 && lx.p[k] == '0' && (lx.p[k + 1] == 'x' || lx.p[k + 1] == 'X')) {
        k += 2;
        while (lx.p + k < lx.end && isxdigit((unsigned char)lx.p[k])) k++;
      } else {
        while (lx.p + k < lx.end && isdigit((unsigned char)lx.p[k])) k++;
        /* After '.', as in %t.0.1, a number is a tuple index: digits only. */
        if (!was_dot) {
          if (lx.p + k + 1 < lx.end && lx.p[k] == '.' && isdigit((unsigned char)lx.p[k + 1])) {
            kind = NIR_FLOAT;
            k++;
            while (lx.p + k < lx.end && isdigit((unsigned char)lx.p[k])) k++;
          }
          if (lx.p + k < lx.end && (lx.p[k] == 'e' || lx.p[k] == 'E')) {
            size_t j = k + 1;
            if (lx.p + j < lx.end && (lx.p[j] == '+' || lx.p[j] == '-')) j++;
            if (lx.p + j < lx.end && isdigit((unsigned char)lx.p[j])) {
              kind = NIR_FLOAT;
              k = j;
              while (lx.p + k < lx.end && isdigit((unsigned char)lx.p[k])) k++;
            }
          }
        }
      }
      if (lx.p + k < lx.end && is_ident_char(lx.p[k])) {
        st = lex_error(&lx, line, col, "malformed number");
        break;
      }
      advance(&lx, k);
      if (!push(&lx, kind, s, k, line, col)) goto nomem;
      continue;
    }
    if (c == '"') {
      k = 1;
      while (lx.p + k < lx.end && lx.p[k] != '"' && lx.p[k] != '\n') {
        if (lx.p[k] == '\\' && lx.p + k + 1 < lx.end) k++;
        k++;
      }
      if (lx.p + k >= lx.end || lx.p[k] != '"') {
        st = lex_error(&lx, line, col, "unterminated string");
        break;
      }
      advance(&lx, k + 1);
      if (!push(&lx, NIR_STRING, s + 1, k - 1, line, col)) goto nomem;
      continue;
    }
    switch (c) {
      case '(': kind = NIR_LPAREN; break;
      case ')': kind = NIR_RPAREN; break;
      case '[': kind = NIR_LBRACKET; break;
      case ']': kind = NIR_RBRACKET; break;
      case '{': kind = NIR_LBRACE; break;
      case '}': kind = NIR_RBRACE; break;
      case ',': kind = NIR_COMMA; break;
      case ';': kind = NIR_SEMI; break;
      case ':': kind = NIR_COLON; break;
      case '?': kind = NIR_QUESTION; break;
      case '*': kind = NIR_STAR; break;
      case '.': kind = NIR_DOT; after_dot = true; break;
      case '=':
        kind = NIR_EQUAL;
        if (lx.p + 1 < lx.end && lx.p[1] == '>') kind = NIR_FATARROW, k = 2;
        break;
      case '-':
        if (lx.p + 1 < lx.end && lx.p[1] == '>') {
          kind = NIR_ARROW;
          k = 2;
          break;
        }
        /* fallthrough */
      default: {
        char msg[64];
        if (isprint((unsigned char)c)) snprintf(msg, sizeof msg, "unexpected character '%c'", c);
        else snprintf(msg, sizeof msg, "unexpected byte 0x%02x", (unsigned char)c);
        st = lex_error(&lx, line, col, msg);
        continue;
      }
    }
    advance(&lx, k);
    if (!push(&lx, kind, s, k, line, col)) goto nomem;
    continue;
  nomem:
    st = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory lexing %s", lx.file);
  }
  if (st) {
    free(lx.toks);
    return st;
  }
  *out = lx.toks;
  *n = lx.n;
  return nimble_ok();
}

void nir_token_describe(const nir_token *t, char *buf, size_t size) {
  if (t->kind == NIR_EOF) {
    snprintf(buf, size, "end of input");
    return;
  }
  const char *prefix = t->kind == NIR_LOCAL ? "%" : t->kind == NIR_GLOBAL ? "@" : t->kind == NIR_STRING ? "\"" : "";
  const char *suffix = t->kind == NIR_STRING ? "\"" : "";
  int len = t->len > 40 ? 40 : (int)t->len;
  snprintf(buf, size, "'%s%.*s%s%s'", prefix, len, t->text, suffix, t->len > 40 ? "..." : "");
}
