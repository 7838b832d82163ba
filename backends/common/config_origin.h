/*
 * config_origin.h — where a value open() refuses came from, shared by the
 * backend plugins (libkilnnodecheck.la, with node_check.h).
 *
 * The host names the file and line of every value its schema refuses
 * ("conf/kiln.ini:12: [cpu] precision = f16: not one of f32|f64"); a
 * backend's own checks at open() (a tile shape, a device list) name the
 * place the same way through the host table's cfg_origin (ABI 2.4). Like
 * every plugin part, this links nothing of libkiln.
 */
#ifndef KILN_CONFIG_ORIGIN_H
#define KILN_CONFIG_ORIGIN_H

#include "kiln/plugin.h"
#include "kiln/status.h"

/* st, open()'s refusal of the value of `key` in sec, annotated with where
 * that value came from: "conf/my.ini:12: [cuda-batched] mmq_shape =
 * 128,128,4 is not auto or ...", or the environment variable or flag that
 * set it last ("--threads: [cpu] threads = ..."). st as it is when the
 * host table has no cfg_origin (ABI 2.3 and older), when sec is NULL
 * (open() without a section), and when the value has no place to name
 * (the declared default, or unset). NULL for a NULL st; the status is the
 * same object, handed on. */
kiln_status kiln_config_origin_annotate(const kiln_host_api *host, const kiln_config_section *sec,
                                        const char *key, kiln_status st);

#endif
