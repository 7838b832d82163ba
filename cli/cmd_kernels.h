/* `kiln kernels`: the kernel cache from the command line. */
#ifndef KILN_CMD_KERNELS_H
#define KILN_CMD_KERNELS_H

/* argv[0] is the subcommand's name ("kernels"). Returns the exit status:
 * 0 done, 1 failed (message on stderr), 2 usage error. */
int kiln_cmd_kernels(int argc, char **argv);

#endif
