# configuration files
