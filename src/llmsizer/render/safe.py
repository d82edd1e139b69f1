"""Output hygiene (issue #15): text that reaches a terminal or a report may carry strings from the user's files
(a ``model_type``, a job title, a model name). Control characters in them would drive the terminal (``\\x1b[31m``
changes colours, ``\\x1b]0;`` the window title, ``\\r`` overwrites a line) and Unicode direction overrides would
reorder what is shown; they are printed escaped (``\\x1b``), visible and harmless. The Markdown report escapes
HTML so a ``<script>`` in a request stays text."""

from __future__ import annotations

import html
import re
import sys
from typing import Any, TextIO

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides/isolates ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def term(text: object) -> str:
    """``text`` with every control character shown as an escape; newlines and tabs kept."""
    s = str(text)
    return _CONTROL.sub(_escape, s) if _CONTROL.search(s) else s


def say(*values: Any, sep: str = " ", end: str = "\n", file: TextIO | None = None) -> None:
    """``print`` for text that may hold strings from the user's files: control characters escaped."""
    print(*(term(v) for v in values), sep=sep, end=end, file=file if file is not None else sys.stdout)


def md_text(text: str) -> str:
    """Markdown text with its HTML escaped (``<script>`` stays text) and control characters shown as escapes."""
    return html.escape(term(text), quote=False)
