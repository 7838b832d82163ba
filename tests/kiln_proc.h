/* Running the built `kiln` command from a cmocka suite: its arguments,
 * standard input from memory, standard output and standard error captured,
 * and its exit status. */
#ifndef KILN_TESTS_KILN_PROC_H
#define KILN_TESTS_KILN_PROC_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kt_proc {
  int status;       /* exit status; 128 + N when killed by signal N */
  char *out, *err;  /* NUL-terminated (they may hold NULs: see the lengths) */
  size_t out_len, err_len;
} kt_proc;

/* Runs $KILN_BUILDDIR/cli/kiln with args (NULL-terminated, the subcommand
 * first), standard input in[0..in_len) (in NULL: /dev/null), and standard
 * error on a pseudo-terminal when err_tty (standard output stays a file).
 * A run longer than 120 s is killed. False, with a message, when the
 * command could not be run at all. */
bool kt_kiln(const char *const *args, const char *in, size_t in_len, bool err_tty, kt_proc *out);
void kt_proc_free(kt_proc *p);

#endif
