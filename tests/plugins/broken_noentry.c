/* A shared object that is not a kiln plugin: it lacks kiln_backend_entry.
 * The loader must refuse it, naming the file and the missing symbol. */
int kiln_broken_noentry_marker(void);
int kiln_broken_noentry_marker(void) { return 42; }
