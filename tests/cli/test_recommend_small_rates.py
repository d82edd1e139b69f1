"""recommend's CPU-vs-GPU advice says each option's rates with their significant digits (units.format_rate): a CPU
option's total below 1 token/s is not '0 tokens/s in total' (probe11 defect 8: llama-3.1-8b at 8k x 8, the best CPU
option 0.056 tokens/s per user, 0.15 in total, printed '0'). The page's advice is the same text (the API's)."""

from __future__ import annotations

import re

from llmsizer.cli.common import resolve_model
from llmsizer.cli.main import build_parser
from llmsizer.cli.recommend_cmd import recommend_answer
from llmsizer.estimate.format_search import format_name


def test_cpu_advice_never_rounds_a_rate_to_zero() -> None:
    argv = ["recommend", "llama-3.1-8b", "--infer", "--context", "8k", "--concurrency", "8"]
    args = build_parser(argv).parse_args(argv)  # the command's own parser (not sys.argv's: pytest's there)
    data, _, rec = recommend_answer(resolve_model(args), args)
    advice = " ".join(data["advice"]) if isinstance(data["advice"], list) else str(data["advice"])
    said = re.search(r"the best CPU option reaches (\S+) at (\S+): ([\d.,]+) tokens/s per user, ([\d.,]+) tokens/s "
                     r"in total", advice)
    assert said, advice
    name, fmt = said.group(1), said.group(2)
    user, total = (float(g.replace(",", "")) for g in said.groups()[2:])
    best = next(o for o in (*rec.options, *rec.rejected)
                if o.is_cpu and o.name == name and format_name(o.weights_format) == fmt)
    assert best.tokens_per_second_per_user and best.tokens_per_second  # the rates the advice says
    assert user > 0 and abs(user - best.tokens_per_second_per_user) <= 0.05 * best.tokens_per_second_per_user
    assert total > 0 and abs(total - best.tokens_per_second) <= 0.05 * best.tokens_per_second
