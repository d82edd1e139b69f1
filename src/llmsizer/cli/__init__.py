"""The `llmsizer` command line: thin parsers over the public API."""
