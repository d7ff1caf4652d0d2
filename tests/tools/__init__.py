"""The maintainers' tools (tools/, benchmarks/): drift, device kit, results pages, timings."""
