/* Exports kiln_backend_entry as a data object of a plausible size at an odd
 * address (laid out in assembly: C cannot misalign an object): reading it
 * as a kiln_backend_ops would be a misaligned access. */
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".byte 0\n"
        ".globl kiln_backend_entry\n"
        ".type kiln_backend_entry, @object\n"
        ".size kiln_backend_entry, 256\n"
        "kiln_backend_entry:\n"
        ".long 1, 0, 256\n"
        ".zero 244\n"
        ".text\n");
