# The foundation every part uses: statuses, the log, escaping file text
# for the terminal, opening a file that must be a regular one, and which
# lines inih takes as sections.
kiln_base_sources = \
	core/src/base/status.c \
	core/src/base/log.c \
	core/src/base/escape.c \
	core/src/base/open_regular.h \
	core/src/base/ini_section.h
