"""The deployment registry and what it resolves to, the first step of every notebook.

Its modules, one line each: docs/CONVENTIONS.md, "Where each kind of fact lives".
"""
