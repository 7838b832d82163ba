# Models: hyperparameters, weight checks, and one builder per architecture
# behind the table in arch_table.c.
kiln_model_sources = \
	core/src/model/model_internal.h \
	core/src/model/model.c \
	core/src/model/model_hparams.c \
	core/src/model/arch_table.c \
	core/src/model/arch_llama.c \
	core/src/model/arch_qwen2.c \
	core/src/model/arch_qwen3.c \
	core/src/model/arch_qwen35.c \
	core/src/model/qwen35_hparams.c \
	core/src/model/decoder.c
