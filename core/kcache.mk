# The kernel-cache service.
kiln_kcache_sources =
