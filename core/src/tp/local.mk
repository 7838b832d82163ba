# Tensor parallelism: the sharding plan, shard graphs, and the emulation of
# N shards on one backend (kiln/tp.h).
kiln_tp_sources = \
	core/src/tp/tp_internal.h \
	core/src/tp/tp_plan.c \
	core/src/tp/tp_shard.c \
	core/src/tp/tp_emulate.c
