# Backend plugins: the loader (dlopen and ABI checks), the registry, and the
# host table handed to every plugin's init().
kiln_plugin_sources = \
	core/src/plugin/plugin_load.c \
	core/src/plugin/plugin_registry.c \
	core/src/plugin/host_api.c
