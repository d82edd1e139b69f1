"""Helpers shared by command modules: unit-aware argument types and output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import InputError
from ..models import load_model
from ..readers.manual import spec_from_manual
from ..specs import ModelSpec
from ..units import parse_bytes, parse_count, parse_tokens


def bytes_arg(text: str) -> int:
    try:
        return parse_bytes(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def count_arg(text: str) -> int:
    try:
        return parse_count(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def emit_json(data: Any) -> None:
    # one write of the whole text: json.dump streams one write per token (a 5,000-option recommend made
    # 500,000 writes, about 1 s), the text is the same
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def tokens_arg(text: str) -> int:
    try:
        return parse_tokens(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_model_args(p: argparse.ArgumentParser) -> None:
    """MODEL (catalog name/id, config.json, folder, .gguf) or manual fields for an unknown model."""
    p.add_argument("model", nargs="?", help="catalog name or id, config.json, model folder or .gguf file "
                   "(omit and give --params/--layers/... for a model llmsizer does not know)")
    p.add_argument("--hub", action="store_true", help="fetch config.json from the Hugging Face Hub if not local")
    g = p.add_argument_group("manual model (Llama-style decoder)")
    g.add_argument("--params", type=count_arg, help="parameter count, e.g. 7B (solves the MLP width)")
    g.add_argument("--layers", type=int)
    g.add_argument("--hidden", type=int)
    g.add_argument("--heads", type=int)
    g.add_argument("--kv-heads", type=int)
    g.add_argument("--head-dim", type=int)
    g.add_argument("--intermediate", type=int)
    g.add_argument("--vocab", type=int)
    g.add_argument("--tied", action="store_true", help="tied input/output embeddings")


def resolve_model(args: argparse.Namespace) -> ModelSpec:
    manual = any(getattr(args, k) is not None for k in ("params", "layers", "hidden", "heads"))
    if args.model and manual:
        raise InputError("give a MODEL or manual fields (--params/--layers/...), not both")
    if args.model:
        return load_model(args.model, hub=args.hub)
    if not manual:
        raise InputError("give a MODEL (see `llmsizer models`) or manual fields (--params 7B --layers 32 ...)")
    return spec_from_manual(params=args.params, layers=args.layers, hidden=args.hidden, heads=args.heads,
                            kv_heads=args.kv_heads, head_dim=args.head_dim, intermediate=args.intermediate,
                            vocab=args.vocab, tied=args.tied)
