"""helpers.machine: GPUs and hardware checks, installs, runtimes."""
