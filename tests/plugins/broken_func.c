/* Exports a function named kiln_backend_entry: the loader must see from
 * the symbol's ELF type that it is no ops table, before reading a byte of
 * it as one (UBSan once caught a misaligned member read here). */
void kiln_backend_entry(void);
void kiln_backend_entry(void) {}
