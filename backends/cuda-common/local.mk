# cuda-common: shared by the CUDA plugins
