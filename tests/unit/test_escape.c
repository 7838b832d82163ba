/* kiln/escape.h: what reaches a terminal from a file. Printable text and
 * well-formed UTF-8 pass; every control byte, C1 control and ill-formed
 * byte is escaped; the result fits the buffer at a whole escape. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/escape.h"

static void expect(const char *in, size_t n, unsigned flags, const char *want) {
  char buf[256];
  size_t len = kiln_escape(buf, sizeof buf, in, n, flags);
  assert_string_equal(buf, want);
  assert_int_equal(len, strlen(want));
  /* and the stream form writes the same */
  char *mem = NULL;
  size_t mlen = 0;
  FILE *f = open_memstream(&mem, &mlen);
  assert_int_equal(kiln_fput_escaped(f, in, n, flags), strlen(want));
  fclose(f);
  assert_string_equal(mem, want);
  free(mem);
}

#define EXPECT(lit, want) expect((lit), sizeof(lit) - 1, 0, (want))

static void test_control_bytes(void **state) {
  (void)state;
  EXPECT("plain text", "plain text");
  EXPECT("\x1b]0;title\x07\x1b[2J", "\\x1b]0;title\\x07\\x1b[2J");
  EXPECT("a\nb\rc\td", "a\\nb\\rc\\td");
  EXPECT("nul\0here", "nul\\x00here");
  EXPECT("del\x7f", "del\\x7f");
  EXPECT("back\\slash", "back\\\\slash");
  expect("two\nlines\\x", 11, KILN_ESCAPE_KEEP_NEWLINE | KILN_ESCAPE_KEEP_BACKSLASH,
         "two\nlines\\x");
}

static void test_utf8(void **state) {
  (void)state;
  EXPECT("caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80");
  EXPECT("c1 \xc2\x9b csi", "c1 \\u009b csi");        /* U+009B: an 8-bit CSI */
  EXPECT("raw \x9b", "raw \\x9b");                     /* a lone continuation byte */
  EXPECT("over \xc0\xaf", "over \\xc0\\xaf");          /* overlong '/' */
  EXPECT("surr \xed\xa0\x80", "surr \\xed\\xa0\\x80"); /* U+D800 */
  EXPECT("big \xf4\x90\x80\x80", "big \\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
  EXPECT("cut \xe2\x96", "cut \\xe2\\x96");             /* truncated sequence */
}

static void test_buffer_limits(void **state) {
  (void)state;
  char buf[8];
  /* "ab\x1bc" -> "ab\\x1bc" (7 bytes) fits in 8 with its NUL; in 7 the
   * escape does not, and nothing after it is written */
  assert_int_equal(kiln_escape(buf, sizeof buf, "ab\x1b" "c", 4, 0), 7);
  assert_string_equal(buf, "ab\\x1bc");
  assert_int_equal(kiln_escape(buf, 7, "abc\x1b", 4, 0), 7);
  assert_string_equal(buf, "abc"); /* the escape is never cut in half */
  assert_int_equal(kiln_escape(buf, 0, "abc", 3, 0), 3);
  assert_int_equal(kiln_escape(buf, 1, "abc", 3, 0), 3);
  assert_string_equal(buf, "");
}

/* kiln_quote: how every error message shows a string from a file. */
static void test_quote(void **state) {
  (void)state;
  char buf[KILN_QUOTE_CAP(8)];
  /* a NUL inside is shown, not taken for the end of the value */
  assert_string_equal(kiln_quote(buf, sizeof buf, "gpt2\0", 5, 8), "\"gpt2\\x00\"");
  assert_string_equal(kiln_quote(buf, sizeof buf, "a\"b\x1b", 4, 8), "\"a\\\"b\\x1b\"");
  assert_string_equal(kiln_quote(buf, sizeof buf, "", 0, 8), "\"\"");
  /* cut after 8 bytes, and never inside a UTF-8 sequence */
  assert_string_equal(kiln_quote(buf, sizeof buf, "0123456789", 10, 8), "\"01234567...\"");
  assert_string_equal(kiln_quote(buf, sizeof buf, "012345\xe2\x96\x81", 9, 8), "\"012345...\"");
  /* the worst case fits KILN_QUOTE_CAP */
  assert_string_equal(kiln_quote(buf, sizeof buf, "\x01\x01\x01\x01\x01\x01\x01\x01\x01", 9, 8),
                      "\"\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01...\"");
  /* a short buffer keeps both quotes, cutting the text at a whole escape */
  char small[8];
  assert_string_equal(kiln_quote(small, sizeof small, "ab\x01", 3, 8), "\"ab\"");
  assert_string_equal(kiln_quote(small, 2, "ab", 2, 8), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_control_bytes),
      cmocka_unit_test(test_utf8),
      cmocka_unit_test(test_buffer_limits),
      cmocka_unit_test(test_quote),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
