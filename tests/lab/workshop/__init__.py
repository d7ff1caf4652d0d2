"""lab.workshop: the workshop's runtimes and routes, its install, the CPU torch's source."""
