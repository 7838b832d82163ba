# unit tests: cpu
