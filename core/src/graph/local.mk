# The graph: tensors and nodes in execution order, the contract between the
# model builders that write it and the planner that reads it.
kiln_graph_sources = \
	core/src/graph/graph_internal.h \
	core/src/graph/graph.c \
	core/src/graph/graph_head.c
