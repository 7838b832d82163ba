# Executor, plugin loader, config, model builders, sampler, embedding API.
kiln_runtime_sources =
