# The executor: planner, sampler, runtime, sessions and generation.
kiln_exec_sources = \
	core/src/exec/plan_internal.h \
	core/src/exec/plan.c \
	core/src/exec/nonfinite.h \
	core/src/exec/nonfinite.c \
	core/src/exec/sampler.c \
	core/src/exec/runtime_internal.h \
	core/src/exec/runtime.c \
	core/src/exec/session.c \
	core/src/exec/generate.c
