# unit tests: kcache
