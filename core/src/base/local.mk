# The foundation every part uses: statuses, the log, and escaping file text
# for the terminal.
kiln_base_sources = \
	core/src/base/status.c \
	core/src/base/log.c \
	core/src/base/escape.c
