"""The web app of ``llmsizer serve`` (issue #13): a versioned JSON HTTP API (``/api/v1``) over the CLI's own
answers, and the pages (``pages.py``, ``static/``). Needs the ``web`` extra (FastAPI, uvicorn); the CLI imports
this package only when ``serve`` runs, and ``import llmsizer`` never does. The contract: ``API.md``."""
