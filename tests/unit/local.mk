# Unit suites, one fragment per area.
include tests/unit/core.mk
include tests/unit/gguf.mk
include tests/unit/tokenizer.mk
include tests/unit/cpu.mk
include tests/unit/kcache.mk
