/* SHA-256's compression function: portable C, and the CPU's own SHA-256
 * instructions where it has them (x86 SHA extensions, ARMv8 cryptography
 * extensions), compiled for them with a function attribute and chosen at
 * run time, so the build needs no special flags and the binary runs on any
 * CPU of its architecture. Blocks are big-endian words, FIPS 180-4 §6.2. */
#include "sha256_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define NIMBLE_SHA256_X86 1
#elif defined(__aarch64__) && defined(__linux__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1 << 6)
#endif
#define NIMBLE_SHA256_ARM 1
#endif

const uint32_t nimble_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* ---- portable ---------------------------------------------------------------- */

static inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static inline uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* One round with the working variables named by position, so the eight
 * rounds of an unrolled step rotate names instead of moving values. */
#define ROUND(a, b, c, d, e, f, g, h, i)                                              \
  do {                                                                                \
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + \
                  nimble_sha256_k[i] + w[(i) & 15];                                   \
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c)); \
    d += t1;                                                                          \
    h = t1 + t2;                                                                      \
  } while (0)

/* W[i] for i >= 16, kept in a ring of 16 words. */
#define SCHEDULE(i)                                                                   \
  do {                                                                                \
    uint32_t x15 = w[((i) - 15) & 15], x2 = w[((i) - 2) & 15];                        \
    w[(i) & 15] += (rotr(x15, 7) ^ rotr(x15, 18) ^ (x15 >> 3)) + w[((i) - 7) & 15] +  \
                   (rotr(x2, 17) ^ rotr(x2, 19) ^ (x2 >> 10));                         \
  } while (0)

void nimble_sha256_blocks_portable(uint32_t state[8], const uint8_t *data, size_t nblocks) {
  for (; nblocks; nblocks--, data += 64) {
    uint32_t w[16];
    for (int i = 0; i < 16; i++) w[i] = load_be32(data + 4 * i);
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i += 8) {
      if (i >= 16)
        for (int k = i; k < i + 8; k++) SCHEDULE(k);
      ROUND(a, b, c, d, e, f, g, h, i + 0);
      ROUND(h, a, b, c, d, e, f, g, i + 1);
      ROUND(g, h, a, b, c, d, e, f, i + 2);
      ROUND(f, g, h, a, b, c, d, e, i + 3);
      ROUND(e, f, g, h, a, b, c, d, i + 4);
      ROUND(d, e, f, g, h, a, b, c, i + 5);
      ROUND(c, d, e, f, g, h, a, b, i + 6);
      ROUND(b, c, d, e, f, g, h, a, i + 7);
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
  }
}

/* ---- x86 SHA extensions ------------------------------------------------------
 * SHA256RNDS2 does two rounds on the state split as ABEF / CDGH;
 * SHA256MSG1/MSG2 compute the message schedule four words at a time. Group g
 * (rounds 4g..4g+3) uses schedule words W[4g..4g+3], kept in a ring of four
 * vectors; W[4g+4..] is finished one group ahead, as Intel's reference does. */
#ifdef NIMBLE_SHA256_X86
#define X86_TARGET __attribute__((target("sha,sse4.1,ssse3")))

#define X86_GROUP(g)                                                                   \
  do {                                                                                 \
    if ((g) < 4) m[(g)] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * (g))), swap); \
    __m128i msg = _mm_add_epi32(m[(g) & 3], _mm_loadu_si128((const __m128i *)&nimble_sha256_k[4 * (g)])); \
    s1 = _mm_sha256rnds2_epu32(s1, s0, msg);                                           \
    if ((g) >= 3 && (g) < 15) {                                                        \
      __m128i t = _mm_alignr_epi8(m[(g) & 3], m[((g) + 3) & 3], 4);                    \
      m[((g) + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(m[((g) + 1) & 3], t), m[(g) & 3]); \
    }                                                                                  \
    s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(msg, 0x0E));                  \
    if ((g) >= 1 && (g) < 13) m[((g) + 3) & 3] = _mm_sha256msg1_epu32(m[((g) + 3) & 3], m[(g) & 3]); \
  } while (0)

X86_TARGET static void sha256_blocks_x86(uint32_t state[8], const uint8_t *data, size_t nblocks) {
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  /* state ABCD EFGH -> the instructions' ABEF CDGH. */
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1); /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B); /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                            /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                                 /* CDGH */
  for (; nblocks; nblocks--, data += 64) {
    __m128i abef = s0, cdgh = s1, m[4];
    X86_GROUP(0); X86_GROUP(1); X86_GROUP(2); X86_GROUP(3);
    X86_GROUP(4); X86_GROUP(5); X86_GROUP(6); X86_GROUP(7);
    X86_GROUP(8); X86_GROUP(9); X86_GROUP(10); X86_GROUP(11);
    X86_GROUP(12); X86_GROUP(13); X86_GROUP(14); X86_GROUP(15);
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);  /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1); /* DCHG */
  _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(t, s1, 0xF0)); /* DCBA */
  _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(s1, t, 8));   /* HGFE */
}

static int x86_has_sha(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  int sse41 = (c >> 19) & 1, ssse3 = (c >> 9) & 1;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return sse41 && ssse3 && ((b >> 29) & 1);
}
#endif

/* ---- ARMv8 cryptography extensions ---------------------------------------------
 * SHA256H/H2 do four rounds on ABCD / EFGH; SHA256SU0/SU1 compute the next
 * four schedule words from the last sixteen. */
#ifdef NIMBLE_SHA256_ARM
#define ARM_TARGET __attribute__((target("+crypto")))

#define ARM_GROUP(g)                                                                   \
  do {                                                                                 \
    uint32x4_t k = vaddq_u32(m[(g) & 3], vld1q_u32(&nimble_sha256_k[4 * (g)]));        \
    if ((g) < 12)                                                                      \
      m[(g) & 3] = vsha256su1q_u32(vsha256su0q_u32(m[(g) & 3], m[((g) + 1) & 3]),     \
                                   m[((g) + 2) & 3], m[((g) + 3) & 3]);                \
    uint32x4_t abcd = s0;                                                              \
    s0 = vsha256hq_u32(s0, s1, k);                                                     \
    s1 = vsha256h2q_u32(s1, abcd, k);                                                  \
  } while (0)

ARM_TARGET static void sha256_blocks_arm(uint32_t state[8], const uint8_t *data, size_t nblocks) {
  uint32x4_t s0 = vld1q_u32(&state[0]), s1 = vld1q_u32(&state[4]);
  for (; nblocks; nblocks--, data += 64) {
    uint32x4_t abcd = s0, efgh = s1, m[4];
    for (int i = 0; i < 4; i++) m[i] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(data + 16 * i)));
    ARM_GROUP(0); ARM_GROUP(1); ARM_GROUP(2); ARM_GROUP(3);
    ARM_GROUP(4); ARM_GROUP(5); ARM_GROUP(6); ARM_GROUP(7);
    ARM_GROUP(8); ARM_GROUP(9); ARM_GROUP(10); ARM_GROUP(11);
    ARM_GROUP(12); ARM_GROUP(13); ARM_GROUP(14); ARM_GROUP(15);
    s0 = vaddq_u32(s0, abcd);
    s1 = vaddq_u32(s1, efgh);
  }
  vst1q_u32(&state[0], s0);
  vst1q_u32(&state[4], s1);
}

static int arm_has_sha2(void) { return (getauxval(AT_HWCAP) & HWCAP_SHA2) != 0; }
#endif

size_t nimble_sha256_impls(nimble_sha256_impl_t out[2]) {
  size_t n = 0;
  out[n++] = (nimble_sha256_impl_t){"portable", nimble_sha256_blocks_portable};
#ifdef NIMBLE_SHA256_X86
  if (x86_has_sha()) out[n++] = (nimble_sha256_impl_t){"x86-sha", sha256_blocks_x86};
#endif
#ifdef NIMBLE_SHA256_ARM
  if (arm_has_sha2()) out[n++] = (nimble_sha256_impl_t){"armv8-sha2", sha256_blocks_arm};
#endif
  return n;
}
