"""lab.bench: real-prompt acceptance, spread and rankings, the lab's figures."""
