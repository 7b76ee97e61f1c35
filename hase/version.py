"""Hase's version, in a module of its own: every layer can name it without importing the package root, which
re-exports the public API (`hase/__init__.py`, the top of the layers)."""
__version__ = "0.1.0"
