# The cpu backend plugin (kiln-cpu.so): the reference backend.
