# the kiln command
