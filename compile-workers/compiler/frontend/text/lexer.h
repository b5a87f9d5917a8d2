/* Tokens of the .nir text form (private to the text frontend). */
#ifndef NIMBLE_COMPILER_NIR_LEXER_H
#define NIMBLE_COMPILER_NIR_LEXER_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/status.h"

typedef enum nir_tok_kind {
  NIR_EOF = 0,
  NIR_IDENT,  /* add, List, float32, _ */
  NIR_LOCAL,  /* %x or %"any.name" (text: the name, unescaped) */
  NIR_GLOBAL, /* @f or @"any.name" (text: the name, unescaped) */
  NIR_INT,    /* 12, -3, 0x3c00 */
  NIR_FLOAT,  /* 1.5, -2e-3, -inf */
  NIR_STRING, /* "..." (text is the raw inside, escapes unprocessed) */
  NIR_LPAREN, NIR_RPAREN, NIR_LBRACKET, NIR_RBRACKET, NIR_LBRACE, NIR_RBRACE,
  NIR_COMMA, NIR_SEMI, NIR_COLON, NIR_EQUAL, NIR_FATARROW, NIR_ARROW, NIR_DOT, NIR_QUESTION,
  NIR_STAR, /* '*': the unknown rank of Tensor[*, dtype] */
} nir_tok_kind;

typedef struct nir_token {
  nir_tok_kind kind;
  const char *text;
  size_t len;
  uint32_t line, col;
} nir_token;

/* Splits `text` into tokens ending with NIR_EOF. *out is malloc'ed (caller
 * frees); tokens point into `text`, or into `arena` for quoted names.
 * Errors carry "file:line:col". */
nimble_status_t nir_lex(nimble_arena *arena, const char *file, const char *text, size_t len,
                        nir_token **out, size_t *n);

/* A short description for messages: "'foo'", "end of input". */
void nir_token_describe(const nir_token *t, char *buf, size_t size);

#endif
