# The kernel-cache service (kiln/kcache.h): templates, descriptors, the
# canonical form and key, the memory and disk tiers, and the host-table
# entries plugins reach it through.
kiln_kcache_sources = \
	core/src/kcache_internal.h \
	core/src/kcache_template.c \
	core/src/kcache_desc.c \
	core/src/kcache_canon.c \
	core/src/kcache_mem.c \
	core/src/kcache_disk.c \
	core/src/kcache_maint.c \
	core/src/kcache_service.c \
	core/src/kcache_config.c \
	core/src/kcache_host.c

kilninclude_HEADERS += core/include/kiln/kcache.h
