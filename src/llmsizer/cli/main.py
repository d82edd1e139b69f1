"""Entry point: builds the parser from the command modules and turns library errors into one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..errors import LlmsizerError
from . import fit_cmd, hardware_cmd, infer_cmd, model_cmds, plan_cmd, recommend_cmd, request_cmd, train_cmd

EPILOG = """examples:
  llmsizer plan examples/lora-finetune-and-chat.yaml -o report.html
  llmsizer request new -o my-request.yaml
  llmsizer models qwen
  llmsizer inspect meta-llama/Llama-3.1-8B
  llmsizer infer llama-3.1-8b --weights q4_k_m --engine llamacpp --context 8192
  llmsizer infer qwen2.5-7b --engine vllm --memory 24GiB --context 32k --concurrency 8 --json
  llmsizer train llama-3.1-8b --method lora --batch 4 --seq 4096 --grad-checkpointing full
  llmsizer fit llama-3.3-70b-instruct --device h100-sxm --count 2 --engine vllm
  llmsizer recommend llama-3.1-8b --context 8k --concurrency 8
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's own convention)
        self.exit(2, f"llmsizer: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="llmsizer", description="What does this LLM workload need? Memory, with every number "
                "traceable to a formula and a source.", epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__
    p.add_argument("--version", action="version", version=f"llmsizer {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    model_cmds.register(sub)
    infer_cmd.register(sub)
    train_cmd.register(sub)
    hardware_cmd.register(sub)
    fit_cmd.register(sub)
    recommend_cmd.register(sub)
    plan_cmd.register(sub)
    request_cmd.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except LlmsizerError as e:
        print(f"llmsizer: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
