# backends/common: what every backend plugin shares, whatever its hardware
# (a libtool convenience library the backends' own libraries link): the
# structural checks of a node against kiln/graph.h (node_check.h), and the
# place a value open() refuses came from (config_origin.h). Like the
# plugins, it never links libkiln: it makes statuses through kiln_host_api.
noinst_LTLIBRARIES += backends/common/libkilnnodecheck.la
backends_common_libkilnnodecheck_la_SOURCES = \
	backends/common/node_check.h \
	backends/common/node_check.c \
	backends/common/config_origin.h \
	backends/common/config_origin.c
backends_common_libkilnnodecheck_la_LIBADD = -lm
