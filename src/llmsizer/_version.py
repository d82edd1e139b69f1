"""The version: one home, read by the package, the CLI and the reports."""

__version__ = "0.1.0"
