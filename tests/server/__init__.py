"""helpers.server: a vLLM server's life, its failures and their diagnosis."""
