"""The one validation layer for numbers: every CLI flag, request field and config field that is a number passes
through ``check_number`` (issue #15). A value must be a real number (booleans are not), finite, integral where it
must be, and within a stated range whose bounds carry their physical reason; the message names the field, where it
came from (flag, file:line or config key), the value and the allowed range.

The named ranges below are the documented maxima (docs/security.md): far above any real model or workload, low
enough that nothing proportional to them is ever allocated by mistake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from .errors import FieldError, InputError


@dataclass(frozen=True)
class Range:
    """Allowed values of one kind of number, and why the bounds are what they are."""

    low: float
    high: float
    integral: bool
    why: str
    low_open: bool = False  # ``low`` itself refused: (low, high], a quantity that must be positive

    def describe(self) -> str:
        kind = "an integer" if self.integral else "a number"
        return f"{kind} in {'(' if self.low_open else '['}{_fmt(self.low)}, {_fmt(self.high)}] ({self.why})"


def _fmt(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e18:
        return f"{int(x):,}"
    if float(x).is_integer() and x > 0 and int(x) & (int(x) - 1) == 0:
        return f"2^{int(x).bit_length() - 1}"
    return f"{x:g}"


# documented maxima: each far above published models and serving setups (docs/security.md)
LAYERS = Range(1, 10_000, True, "decoder layers; the deepest published LLMs have ~130")
HEADS = Range(1, 65_536, True, "attention heads; published models have <= 128")
WIDTH = Range(1, 2**20, True, "hidden / intermediate / head width; published models are <= 2^17")
VOCAB = Range(1, 2**24, True, "vocabulary entries; published tokenizers are <= 2^18")
EXPERTS = Range(1, 65_536, True, "MoE experts; published models have <= 512")
TOKENS = Range(1, 2**31, True, "tokens per sequence; 2^31 is past every published context window")
CONCURRENCY = Range(1, 2**24, True, "sequences at once")
# one description for every count flag and request count field (a request int field without its own bounds too)
COUNT = Range(1, 2**20, True, "a count; 2^20 = 1,048,576 is past every real setting")
# passes a training loop makes over a tensor per micro-batch beyond its forward and backward (train_metric_passes)
PASSES = Range(0, 64, True, "passes per micro-batch; Composer's MPT runs 2")
FRACTION = Range(0, 1, False, "a share of a whole")
BYTES = Range(1, 2**60, True, "bytes; 2^60 B = 1024 PiB, the largest size unit read")
# a memory budget given as a number of bytes (the Python API's memory=): under 1 MiB it is a forgotten unit, as the
# CLI, the web API and request files refuse a bare '24' (units.py UNITLESS_SIZE_FLOOR); no device is that small
DEVICE_MEMORY = Range(2**20, 2**60, True, "bytes; under 1 MiB is a forgotten unit: 24 GiB is 24 * 2**30")
POSITIVE = Range(0, 1e30, False, "a non-negative finite quantity")
# CLI flags and request fields (issue #15)
PARAMS = Range(1, 10**15, True, "parameters; the largest published models have ~2 x 10^12")
AMOUNT = Range(0, 10**15, True, "a count of people, examples or parameters; 10^15 is past every real one")
TRAIN_TOKENS = Range(1, 10**16, True, "tokens to train on; the largest published runs use ~4 x 10^13")
SIZE = Range(0, 2**60, True, "bytes; 2^60 B = 1024 PiB, the largest size unit read")
SECONDS = Range(0, 3.2e10, False, "seconds; 3.2 x 10^10 s is about 1,000 years")
MONEY = Range(0, 1e15, False, "US dollars; 10^15 is past any budget")
# a price limit or budget the user sets (recommend --max-cost, --max-cost-per-hour): 0 would rule out everything, so
# more than 0 (recommend.Constraints reads the Python API's through this range, with the same words)
BUDGET = Range(0, 1e15, False, "US dollars, more than 0; 10^15 is past any budget", low_open=True)
# the price of a kWh for owned hardware's power (fit and recommend --kwh-price, the web API's kwh_price,
# recommend.Constraints): 0 is a price (free power: owned hardware costs nothing per hour). The upper bound is a
# sanity bound, far above wholesale markets' price caps (ERCOT's $5,000/MWh = $5/kWh; Australia's NEM about
# AUD 17,500/MWh in 2024-25)
KWH_PRICE = Range(0, 1e3, False, "US dollars per kWh, 0 for free power; $1,000/kWh is past any tariff or market cap")
# a throughput the user requires (recommend --tokens-per-second, --user-tokens-per-second): 0 asks nothing, so
# more than 0
TOKEN_RATE = Range(0, 1e12, False, "tokens per second, more than 0; 10^12 is past any service", low_open=True)
# requests arriving per second (fit --request-rate: an open load, formulas/serving_queue.py eq. Q10): more than 0
REQUEST_RATE = Range(0, 1e9, False, "requests per second, more than 0; 10^9 is past any service", low_open=True)
# a time limit the user sets (recommend --max-ttft, --deadline): 0 would rule out everything, so more than 0
TIME_LIMIT = Range(0, 3.2e10, False, "seconds, more than 0; 3.2 x 10^10 s is about 1,000 years", low_open=True)
BANDWIDTH = Range(0, 1e15, False, "bytes per second; 1 PB/s is past any network or disk")
# a service's hours per day / days per week up (a request file's service.hours_per_day / days_per_week): a service
# never up is no service, so more than 0 (0 was read as not given, around the clock: r32surf report)
HOURS_PER_DAY = Range(0, 24, False, "hours a day the service is up, more than 0; a day has 24", low_open=True)
DAYS_PER_WEEK = Range(0, 7, False, "days a week the service is up, more than 0; a week has 7", low_open=True)
# a CPU's clock in Hz (a hardware file's ``clock``): shipping server and desktop cores run 1-6 GHz; outside 0.1-10 GHz
# is a unit slip (lscpu's 'CPU max MHz: 5000' written as a bare 5000), review21 D7
CLOCK = Range(1e8, 1e10, False, "Hz, a CPU core clock of 0.1 to 10 GHz; give its unit, e.g. '3.7 GHz' or '5000 MHz'")
RATE = Range(0, 1e12, False, "requests per second; 10^12 is past any service")
HEADROOM = Range(0, 0.99, False, "share of device memory kept free; 1 would leave nothing to use")
UTILIZATION = Range(0.001, 1, False, "a share of device memory or of peak FLOPs; 0 would do nothing")
GPU_LAYERS = Range(0, 10_000, True, "layers offloaded to the GPU; 0 = none")
# SGLang --mamba-full-memory-ratio r: the recurrent-state pool gets r / (1 + r) of the memory after the weights
# (kv_cache_configurator.py:3350-3356); 0 would leave it none (SGLang then stops: "Not enough GPU memory for hybrid
# ... state cache", :3392-3402), and past 1000 the token pool keeps under 0.1 %
MEMORY_RATIO = Range(0.001, 1000, False, "a ratio of recurrent-state memory to KV-pool memory; 0 leaves no state pool")
CPU_MOE_LAYERS = Range(0, 10_000, True, "layers whose MoE expert tensors stay in host memory; 0 = none")
SPLIT_SHARE = Range(0, 1e6, False, "a GPU's share of a llama.cpp --tensor-split (proportions, e.g. 3,1)")
# llama.cpp's device limit, one home: llama_max_devices() returns 16 (ggml-org/llama.cpp@01649e61c782
# src/llama.cpp:85-87), the size of llama_model_params.tensor_split ("size: llama_max_devices()", include/llama.h
# @0011438e): the most GPUs one llama.cpp model is split over (common.h's tensor_split[128] is only the CLI's buffer)
LLAMA_MAX_DEVICES = 16
# the most shares a -ts / --tensor-split names: common/arg.cpp's -ts handler throws "got %d input configs, but system
# only has %d devices" when split_arg.size() >= llama_max_devices(), so 15; the auto-fit prints one share per GPU
MAX_GPUS = LLAMA_MAX_DEVICES - 1
LLAMACPP_GPUS = Range(1, LLAMA_MAX_DEVICES, True, "GPUs llama.cpp splits one model over (llama_max_devices())")
# the devices of one machine (`--gpus-per-node` of fit, train, models --fits-on, recommend; a plan's devices per node;
# TrainingWorkload.gpus_per_node), in one home: at most the largest single NVLink domain the catalog holds, a GB200 /
# GB300 NVL72 rack's 72 GPUs (catalog/data/hardware/accelerators.json gb200 interconnect_bandwidth: aiconfigurator
# gb200.yaml, "NVLink 5 within the 72-GPU rack"; gb300: klockwood-gb300-nvl72, the rack's figures over its 72 GPUs).
# Before, only COUNT bounded it: `recommend --gpus-per-node 4096` searched 2..4096 cards (21 s) and chose
# "4096 x rx-7800-xt" as one machine (review20 D8)
MACHINE_GPUS = Range(1, 72, True, "devices of one machine; the largest single NVLink domain in the catalog is a "
                     "GB200/GB300 NVL72 rack's 72 GPUs")
ZERO_STAGE = Range(0, 3, True, "DeepSpeed ZeRO stages are 0, 1, 2 and 3")
FSDP_VERSION = Range(1, 2, True, "PyTorch FSDP1 (FullyShardedDataParallel) or FSDP2 (fully_shard)")
SEED = Range(0, 2**32 - 1, True, "a 32-bit random seed")
# how long a requested or held booking lasts unconfirmed (`capacity book --hold-hours`, the web's ``hold_hours``,
# provider/store.py DEFAULT_HOLD), one home for its range and its default: a policy of this tool, not a measurement
# (a day to confirm; at most a year, past which a tentative hold is a confirmed booking by another name)
HOLD_HOURS = Range(0, 24 * 366, False, "hours a requested or held booking lasts unconfirmed; at most a year")
DEFAULT_HOLD_HOURS = 24.0
TOP = Range(1, 10_000, True, "rows shown")
DEFAULT_TOP = 8  # options and rejections a recommendation's text shows (recommend --top's default, one home)

# model-description fields that may be 0 (absent block / first layer index) and image sizes (readers, #15)
LAYER_INDEX = Range(0, 10_000, True, "a layer index or number of layers; 0 allowed, at most LAYERS' maximum")
TOKENS_OR_ZERO = Range(0, 2**31, True, "a token count; 0 means none")
SEQUENCES_OR_ZERO = Range(0, 2**24, True, "sequences at once; 0 means none")
# LoRA (peft LoraConfig r and lora_alpha: the adapter is B A x scaled by alpha / r; Hu et al. 2021, sec. 4.1): one
# range each for `train --rank/--alpha`, the request's peft.rank/alpha and TrainingWorkload
GROUP_SIZE = Range(1, 2**20, True, "weights sharing one quantization scale (GPTQ/AWQ groups: 32, 64, 128)")
LORA_RANK = Range(1, 2**20, True, "LoRA rank r: the inner width of the adapters B A")
LORA_ALPHA = Range(0, 2**20, False, "LoRA alpha: the adapters' output is scaled by alpha / r; no memory effect")
WIDTH_OR_ZERO = Range(0, 2**20, True, "a width; 0 means the block is absent")
EXPERTS_OR_ZERO = Range(0, 65_536, True, "MoE experts; 0 means none")
PIXELS = Range(1, 2**16, True, "image side, patch side or channels of a vision encoder; published ones are <= 2^12")
IMAGE_AREA = Range(0, 2**32, True, "pixels of an image or video; 0 means no bound given")
IMAGES = Range(0, 4096, True, "images per sequence; published models accept at most a few hundred")
VIDEO_FRAMES = Range(0, 2**16, True, "sampled video frames per sequence; Qwen2-VL samples at most 768")
# llama.cpp --image-min-tokens / --image-max-tokens (common/arg.cpp L2637-2650 @ 0c1e5709): merged tokens per image of a
# dynamic-resolution model; llama.cpp reads a value <= 0 as "the model's default" (tools/mtmd/clip.cpp L210-215), so
# 0 is refused here (omit the flag); 2^20 tokens x (16 x 2)^2 pixels stays inside clip's int32 image_max_pixels
IMAGE_TOKENS = Range(1, 2**20, True, "llama.cpp image tokens per image; omit the flag for the model's default")


class NumberError(InputError):
    """A number that was read but is not finite, not whole where it must be, or out of its range: its message
    already says everything (parsers that rewrite their own "cannot read" messages pass it through)."""


class FieldNumberError(NumberError, FieldError):
    """A NumberError about one workload field, named by ``field`` (FieldError): each surface writes the field as
    its user gave it (``--count`` for the device count of `fit --auto --count`, not the Python name ``gpus``)."""


def check_number(value: object, name: str, rng: Range, where: str = "") -> float | int:
    """``value`` as an int (integral ranges) or float, or one-line InputError naming ``name`` and ``where``."""
    if type(value) is int and rng.low <= value <= rng.high and not (rng.low_open and value == rng.low):
        return value if rng.integral else float(value)  # the common case, as the checks below answer it
    if (type(value) is float and not rng.integral and rng.low <= value <= rng.high and math.isfinite(value)
            and not (rng.low_open and value == rng.low)):
        return value  # the other common case (a catalog's values in base units), as the checks below answer it
    at = f" ({where})" if where else ""
    head = f"{name}{at}: " if name or at else ""  # no name: the caller (argparse, the request reader) adds it
    if isinstance(value, bool):  # a JSON/YAML true/false or a Python True/False: one wording on every surface
        raise NumberError(f"{head}{not_a_boolean(value, rng)}")
    if not isinstance(value, (int, float)):
        raise NumberError(f"{head}expected {rng.describe()}, got {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise NumberError(f"{head}must be finite, got {value!r}; expected {rng.describe()}")
    if rng.integral and isinstance(value, float) and not value.is_integer():
        raise NumberError(f"{head}must be a whole number, got {value!r}; expected {rng.describe()}")
    if not rng.low <= value <= rng.high or (rng.low_open and value == rng.low):
        raise NumberError(f"{head}{_shown(value)} is out of range; expected {rng.describe()}")
    return int(value) if rng.integral else float(value)


def not_a_boolean(value: bool, rng: Range) -> str:
    """The one message of a boolean given for a number (``zero: true`` in a request file, ``"zero": true`` on the
    web, ``zero=True`` in Python), after the name of its field: the range and the value as JSON and YAML write it
    (the Python API, the request reader and the web bridge all say this)."""
    return f"expected {rng.describe()}, got the boolean {'true' if value else 'false'}"


def unreadable(shown: str, rng: Range, suffixes: bool = False) -> str:
    """The one message of a text that is no number (``--zero yes``, ``zero: yes`` in a request file, ``zero="yes"``
    in Python), after the name of its field: the range, and -- where the parser reads decimal suffixes and the range
    reaches 1,000, the smallest value a suffix can name -- that '32k' and '7B' are read."""
    tail = "; decimal suffixes are read: '40k' = 40,000, '7B' = 7 x 10^9" if suffixes and rng.high >= 1e3 else ""
    return f"cannot read {shown} as a number; expected {rng.describe()}{tail}"


def _shown(value: object) -> str:
    """The value for a message, short: a 10^400 integer or a 1 MB string must not become the message."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, int) and abs(value) >= 10**18:
        return f"about 10^{int(math.log10(abs(value)))}" if value > 0 else f"about -10^{int(math.log10(-value))}"
    if abs(value) >= 1e18:
        return f"{value:.3g}"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))  # a whole number as one: '--concurrency 1e9' is 1000000000, not '1e+09'
    return f"{value:g}" if isinstance(value, float) else str(value)


def exactly_whole(text: str) -> bool:
    """Whether the number written as ``text`` ('1e6', '4.0', '4.00000000000000001') is a whole number exactly, not
    only once read as a float; True for text that is not a plain number (its parser judges it)."""
    try:
        d = Decimal(text.strip().replace("_", ""))
    except InvalidOperation:
        return True
    return not d.is_finite() or d == d.to_integral_value()

