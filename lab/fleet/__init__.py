"""Outgrow one server: N replicas behind vLLM's router, or one data + expert parallel server.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
