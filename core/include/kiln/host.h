/*
 * kiln/host.h — the host table libkiln hands to plugins (kiln/plugin.h).
 *
 * The plugin loader passes it to every plugin's init(); it is exported so
 * that code built into a test or an embedding program (which, unlike a
 * plugin, links libkiln) can call a backend's internals with the same
 * services a loaded plugin gets.
 */
#ifndef KILN_HOST_H
#define KILN_HOST_H

#include "kiln/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The process-wide host table: KILN_PLUGIN_ABI_MAJOR.MINOR, static storage,
 * never NULL. */
const kiln_host_api *kiln_host_api_get(void);

#ifdef __cplusplus
}
#endif
#endif
