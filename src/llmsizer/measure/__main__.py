"""``python -m llmsizer.measure infer|train ...``: the ``llmsizer measure`` command without the main CLI
(used by bench/gpu_validation.sh, which runs from a source tree)."""

from __future__ import annotations

import sys

from ..cli.main import _Parser
from ..errors import LlmsizerError


def main(argv: list[str] | None = None) -> int:
    from ..cli import measure_cmd

    p = _Parser(prog="llmsizer")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    measure_cmd.register(sub)
    args = p.parse_args(["measure", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args) or 0)
    except LlmsizerError as e:
        print(f"llmsizer: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
