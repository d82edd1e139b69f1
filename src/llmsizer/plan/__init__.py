"""Plans: a request in, a complete checked plan out (memory and hardware, storage, network, duration and cost per
job and in total, the checks a reviewer would raise, and chart data). Rendering lives in ``render/``."""

from .checks import run_checks
from .compose import make_plan, plan_file
from .result import Chart, Check, Figure, Hardware, JobPlan, Plan, Section, Series

__all__ = ["Chart", "Check", "Figure", "Hardware", "JobPlan", "Plan", "Section", "Series", "make_plan", "plan_file",
           "run_checks"]
