"""How a request file's error line names the key it is about (plan/compose.py ``_about``), for tests that compare it
with the CLI's or the Python API's message for the same input."""

from __future__ import annotations

import re


def keyed(where: str, field: str, message: str) -> str:
    """The end of a request's error line for ``message`` about ``field`` at ``where`` (a key path such as
    'settings.attention', or the job's words): a message that opens with the field's own key gets the path in its
    place, once ('settings.attention flash (...) cannot run ...'); another one the path before it."""
    if where.startswith("settings.") and re.match(rf"{re.escape(field)}(?![\w-])", message):
        return where + message[len(field):]
    return f"{where}: {message}"
