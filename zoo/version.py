"""The version of zoo, in a module of its own: records and reports stamp it without importing the package's
whole public API (zoo/__init__.py), which would make every layer depend on every other."""

__version__ = "0.1.0"
