"""The project's own tooling (notebook build / lint / run, flag tables, results pages).

Not shipped and never imported by ``helpers``.
"""
