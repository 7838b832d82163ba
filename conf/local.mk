# Configuration files: the default and one example per backend. Each is
# loaded and validated by tests/unit/test_conf_files (unknown keys fail).
conf_files = conf/kiln.ini conf/cpu.ini conf/hello.ini conf/cuda-serial.ini conf/cuda-batched.ini \
	conf/cuda-cc120.ini
EXTRA_DIST += $(conf_files)
