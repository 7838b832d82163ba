# The kernel-cache service (kiln/kcache.h): templates, descriptors, the
# canonical form and key, the memory and disk tiers, and the host-table
# entries plugins reach it through.
kiln_kcache_sources = \
	core/src/kcache/kcache_internal.h \
	core/src/kcache/kcache_log.c \
	core/src/kcache/kcache_template.c \
	core/src/kcache/kcache_desc.c \
	core/src/kcache/kcache_canon.c \
	core/src/kcache/kcache_mem.c \
	core/src/kcache/kcache_tmp.c \
	core/src/kcache/kcache_folder.c \
	core/src/kcache/kcache_disk.c \
	core/src/kcache/kcache_maint.c \
	core/src/kcache/kcache_service.c \
	core/src/kcache/kcache_config.c \
	core/src/kcache/kcache_host.c
