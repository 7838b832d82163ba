# INI configuration (inih) checked against one table of every section and key.
kiln_config_sources = \
	core/src/config/config_internal.h \
	core/src/config/config.c \
	core/src/config/config_table.c
