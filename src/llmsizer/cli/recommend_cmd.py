"""`llmsizer recommend MODEL (--infer | --train)`: which hardware, how many, which weight format, at what cost."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..numbers import BUDGET, DEFAULT_TOP, KWH_PRICE, REQUEST_RATE, TOKEN_RATE, TOP
from ..render.safe import say
from ..specs import InferenceWorkload, ModelSpec, normalize_engine
from .commands import COMMAND_HELP
from .common import add_model_args, duration_arg, emit_json, exit_code, float_arg, int_arg, money_arg, resolve_model
from .workload_args import (
    add_fit_target_arg,
    add_headroom_arg,
    add_inference_args,
    add_metric_arg,
    add_training_args,
    inference_fields,
    refuse_serving_flags,
    refuse_training_flags,
    training_fields,
)

if TYPE_CHECKING:
    from ..recommend import Recommendation

# the search, the estimators and the text renderer are imported where a recommendation is made, not with the parser
# (probe33 D7: `recommend --help` imported every estimator to print its help)

EPILOG = """examples:
  llmsizer recommend llama-3.1-8b --infer --context 8k --concurrency 8
  llmsizer recommend llama-3.1-70b-instruct --concurrency 128 --tokens-per-second 3000 --provider aws
  llmsizer recommend qwen2.5-1.5b-instruct --laptop
  llmsizer recommend llama-3.1-8b --max-cost-per-hour 2 --max-ttft 1 --cloud-only --json
  llmsizer recommend llama-3.1-8b --train --tokens 10B --deadline 3d --max-cost 5000
  llmsizer recommend qwen2.5-0.5b --hardware-file my-server.json --kwh-price 0.30

exit code: 0 an option meets every constraint, 1 none does, 2 bad input
"""


def register(sub: Any) -> None:
    p = sub.add_parser("recommend", help=COMMAND_HELP["recommend"],
                       description="Search devices x count x weight format x parallelism over the catalog (and "
                                   "your --hardware-file) for options that fit and meet the constraints; rank by "
                                   "cost; give the reason each option was chosen or rejected.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--infer", action="store_true", help="serving (default)")
    mode.add_argument("--train", action="store_true", help="training: memory per option, time and cost")
    add_metric_arg(p)
    # the serving workload: the flags of `fit` (every InferenceWorkload field), each option judged by `fit` with them
    add_inference_args(p, tensor_parallel=False, attention=False,
                       engine_default="for every option; default: each option's: vLLM on data-center GPUs and several "
                                      "devices, llama.cpp on Apple, CPUs and single consumer cards",
                       weights_default="searched per option, from the checkpoint's format down; give one to force it",
                       speed=True)
    add_training_args(p, budget="each option's device")
    p.add_argument("--request-rate", type=float_arg(REQUEST_RATE),
                   help="requests arriving per second at random (a Poisson process, as `fit --request-rate`) instead "
                        "of --concurrency: each option is the fewest copies of a candidate that carry the rate below "
                        "their capacity and within the limits, as `fit --count` of them answers it (its busiest "
                        "replica timed; formulas/serving_queue.py eq. Q10)")
    c = p.add_argument_group("constraints")
    c.add_argument("--max-cost-per-hour", type=money_arg(BUDGET, "h"),
                   help="budget in USD per hour ('2', '$2/h')")
    c.add_argument("--max-cost", type=money_arg(BUDGET, rates="the hourly limit is --max-cost-per-hour"),
                   help="training budget for the whole run, USD ('5000', '$5k')")
    c.add_argument("--deadline", type=duration_arg, help="training wall-clock limit, e.g. 3d, 12h, '2 weeks' (without it, a run past 90 days is rejected as too slow)")
    c.add_argument("--tokens-per-second", type=float_arg(TOKEN_RATE), help="output tokens/s in total at the concurrency (every request's TTFT and the prompts' prefill counted: fit's tokens_per_second_total)")
    c.add_argument("--user-tokens-per-second", type=float_arg(TOKEN_RATE), help="minimum decode speed per user")
    c.add_argument("--max-ttft", type=duration_arg, help="time-to-first-token limit in seconds, e.g. 0.5 or 2s")
    c.add_argument("--laptop", action="store_true", help="must run on my laptop (laptop devices only)")
    c.add_argument("--cloud-only", action="store_true", help="cloud instances only")
    c.add_argument("--provider", action="append", default=[], help="aws, gcp, azure (repeatable)")
    c.add_argument("--kwh-price", type=money_arg(KWH_PRICE, "kWh"),
                   help="USD per kWh ('0.12', '$0.12/kWh'; 0: free power), to price owned hardware by its power draw "
                        "(with no owned device in --hardware-file, the catalog's local cards)")
    add_headroom_arg(c)
    add_fit_target_arg(c)  # the margin fit keeps for llama.cpp (estimate/verdict.py margin_rule), as fit's flag
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                   help="extra hardware (JSON/YAML); its devices marked owned (`hardware detect` writes them) are "
                        "your hardware: answered first, the catalog's local cards then ones to buy")
    p.add_argument("--top", type=int_arg(TOP), default=DEFAULT_TOP, help=f"options and rejections to show (default "
                   f"{DEFAULT_TOP})")
    p.add_argument("--json", action="store_true", help="machine-readable output (everything)")
    p.set_defaults(func=cmd_recommend)


def recommend_answer(spec: ModelSpec, args: argparse.Namespace) -> tuple[dict[str, Any], int, Recommendation]:
    """The answer of `recommend` (its ``--json`` data and exit code) for ``spec`` and the parsed flags; the web API
    returns the same data."""
    from ..estimate.fit import rate_and_concurrency
    from ..recommend import Constraints, recommend_inference, recommend_training
    cons = Constraints(max_cost_per_hour=args.max_cost_per_hour, tokens_per_second=args.tokens_per_second,
                       user_tokens_per_second=args.user_tokens_per_second,
                       max_ttft=args.max_ttft, deadline=args.deadline, max_cost=args.max_cost,
                       laptop=args.laptop, cloud_only=args.cloud_only, providers=tuple(args.provider),
                       kwh_price=args.kwh_price, headroom=args.headroom)
    if args.train:
        refuse_serving_flags(args)
        if args.tokens is None:
            raise InputError("--train needs --tokens (how many tokens to train on, e.g. 10B)")
        rec = recommend_training(spec, tokens=args.tokens, utilization=args.utilization, constraints=cons,
                                 hardware_files=args.hardware_file, training_fields=training_fields(args),
                                 model_name=args.model if isinstance(getattr(args, "model", None), str) else None)
    else:
        # --gpus-per-node serving: the machines your own (bare) devices are, each candidate's `fit --gpus-per-node`
        # (estimate/fit.py serving_machine_size, the one rule; an instance is its own machine)
        per_node, args.gpus_per_node = args.gpus_per_node, None
        refuse_training_flags(args)
        fields = inference_fields(args)  # every serving field given, as `fit` takes them
        for name in ("gpus", "weights", "context", "concurrency", "output_tokens", "engine"):
            fields.pop(name, None)  # --gpus is the training flag here; the others are recommend_inference's own
        if args.fit_target is not None:  # a workload field (InferenceWorkload.fit_target), as fit passes it
            fields["fit_target"] = args.fit_target
        if args.request_rate is not None and args.concurrency is not None:  # (fit's line, fit's rule)
            raise rate_and_concurrency()
        rec = recommend_inference(spec, context=args.context or InferenceWorkload.context,
                                  concurrency=args.concurrency or InferenceWorkload.concurrency,
                                  request_rate=args.request_rate,
                                  output_tokens=args.output_tokens, weights=args.weights, constraints=cons,
                                  hardware_files=args.hardware_file,
                                  engine=normalize_engine(args.engine) if args.engine else None,
                                  gpus_per_node=per_node, **fields)
    return rec.to_dict(), exit_code(bool(rec.options)), rec


def cmd_recommend(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    data, code, rec = recommend_answer(spec, args)
    if args.json:
        emit_json(data)
        return code
    from ..render.recommend_text import render_recommendation
    say(render_recommendation(rec, args.top))
    return code
