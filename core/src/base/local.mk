# The foundation every part uses: statuses and the log.
kiln_base_sources = \
	core/src/base/status.c \
	core/src/base/log.c
