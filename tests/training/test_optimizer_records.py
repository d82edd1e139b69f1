"""One record per optimizer (formulas/training_states.py ``OPTIMIZER_INFO``, issue #12): every name the CLI and
``llmsizer measure`` accept has exactly one, its ``library`` field is the implementation ``measure`` runs, and the
state bytes and step traffic the estimator derives from it equal what that implementation does.

Independent truth: the optimizers themselves on the CPU (torch 2.13.0 and bitsandbytes, whose CPU backend runs the
same ``bitsandbytes::optimizer_update_*`` ops the CUDA kernels implement): their state tensors after a step, and
which tensors each bitsandbytes update op reads and writes (compared before and after the op). The per-element
bytes of the CUDA kernels are also counted here from their source (bitsandbytes tag 0.50.1, csrc/kernels.cu
``kOptimizer32bit1State`` lines 805-909: ``Load(g)``, ``LoadFloat(state1)``, ``Load(p)``, ``Store(p)``,
``StoreFloat(state1)``; ``kOptimizerStatic8bit1StateBlockwise`` lines 1152-1324: the same with uint8 state1 and
one fp32 ``absmax1`` per 256-element block loaded and stored).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")

from llmsizer.cli.main import build_parser  # noqa: E402
from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.duration import training_duration_for  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.dtypes import DTYPE_BYTES  # noqa: E402
from llmsizer.formulas.optimizer_step import optimizer_step_bytes  # noqa: E402
from llmsizer.formulas.training_states import (  # noqa: E402
    ADAM_STEP_BYTES,
    BNB_OPTIMIZERS,
    OPTIMIZER_INFO,
    optimizer_state_bytes_counted,
)
from llmsizer.measure.settings import MeasureSettings  # noqa: E402
from llmsizer.measure.workloads import make_optimizer, optimizer_state_tensors, tensor_bytes  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from llmsizer.specs.training import OPTIMIZERS  # noqa: E402

# a matrix over bitsandbytes' 8-bit threshold (4096 elements), one under it, a vector, an odd-sized matrix
SHAPES = [(256, 512), (48, 64), (1024,), (96, 100)]
TORCH_DT = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _choices(argv: list[str]) -> tuple[str, ...]:
    parser = build_parser(all_commands=True)  # not sys.argv's: pytest's own arguments pick no command
    sub = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    cmd = sub[argv[0]]
    if len(argv) > 1:
        cmd = cmd._subparsers._group_actions[0].choices[argv[1]]  # type: ignore[union-attr]
    (action,) = [a for a in cmd._actions if "--optimizer" in a.option_strings]
    return tuple(action.choices)


def test_every_accepted_optimizer_has_exactly_one_record() -> None:
    assert tuple(OPTIMIZER_INFO) == OPTIMIZERS  # one record per name, no record without a name
    assert all(name == info.name for name, info in OPTIMIZER_INFO.items())
    assert {info.library for info in OPTIMIZER_INFO.values()} == {"torch", "bitsandbytes"}
    for argv in (["train"], ["fit"], ["measure", "train"]):
        assert _choices(argv) == OPTIMIZERS, argv


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_measure_runs_the_library_the_record_names(name: str) -> None:
    """``measure`` builds the optimizer of the record's library, and on a CPU refuses exactly the paged ones
    (bitsandbytes 0.50.2 runs the others there; a paged one falls back to unpaged RAM, which the estimate refuses
    too): the record's fields decide both."""
    info = OPTIMIZER_INFO[name]
    params = [torch.nn.Parameter(torch.randn(64, 64))]
    opt = make_optimizer(name, params)
    assert type(opt).__module__.split(".")[0] == info.library, name
    assert (name in BNB_OPTIMIZERS) == info.bnb
    settings = dict(kind="training", model="tiny", device="cpu", optimizer=name)
    if info.paged:
        with pytest.raises(InputError, match="bitsandbytes allocates its states unpaged"):
            MeasureSettings(**settings)
    else:
        MeasureSettings(**settings)


def _stepped(name: str, dtype: str) -> Any:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, dtype=TORCH_DT[dtype])) for s in SHAPES]
    opt = make_optimizer(name, params)  # measure's own choice of class and implementation
    for _ in range(2):
        for p in params:
            p.grad = torch.randn_like(p)
        opt.step()
    return opt


@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_state_bytes_after_a_step_equal_the_estimate(name: str, precision: str) -> None:
    """Pure bf16 (and fp32) training: the state dtype the estimator resolves for the optimizer (its
    ``optimizer_state_dtype`` assumption) gives exactly the bytes of the state tensors ``measure`` counts after a real
    step. bitsandbytes' Lion keeps fp32 momentum under bf16 parameters (optim/optimizer.py @0.50.1
    ``Optimizer1State.init_state``: ``get_state_buffer(p, dtype=torch.float32)``); the estimate said 2 B before."""
    est = estimate_training(load_model("llama-3.2-1b"), optimizer=name, precision=precision)
    sd = str({a.name: a.value for a in est.assumptions}["optimizer_state_dtype"])
    opt = _stepped(name, precision)
    measured = tensor_bytes(optimizer_state_tensors(opt))
    assert optimizer_state_bytes_counted(Counter(SHAPES), name, DTYPE_BYTES[sd]) == measured, (name, sd)


def test_a_bitsandbytes_optimizer_refuses_a_half_state_dtype() -> None:
    with pytest.raises(InputError, match="fp32"):
        estimate_training(load_model("llama-3.2-1b"), optimizer="lion", precision="bf16",
                          optimizer_state_dtype="bf16")


def _update_traffic(opt: Any, params: list[Any]) -> int:
    """Bytes the bitsandbytes update ops of one step read (every tensor argument) and write (the arguments whose
    contents the op changed)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    total = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            if func.namespace != "bitsandbytes":
                return func(*args, **kwargs)
            ts = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            before = [t.clone() for t in ts]
            out = func(*args, **kwargs)
            for t, b in zip(ts, before, strict=True):
                size = t.numel() * t.element_size()
                total[0] += size + (size if not torch.equal(t, b) else 0)
            return out

    for p in params:
        p.grad = torch.randn_like(p)
    with Count():
        opt.step()
    return total[0]


@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("name", BNB_OPTIMIZERS)
def test_bitsandbytes_step_bytes_equal_its_update_op(name: str, dtype: str) -> None:
    """Eq. (O5) against the tensors bitsandbytes' own update op reads and writes in a real step (the second: the
    first creates the states), over one matrix large enough that the 256-entry fp32 quantization map each 8-bit
    state also reads (1 KiB, loaded once per thread block into shared memory on CUDA; left out of eq. O5) is under
    0.1 % of the traffic, while the block absmax (8 B per 256 elements and state, 0.4 % of Lion 8-bit's) counts."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(512, 512, dtype=TORCH_DT[dtype]))]
    opt = bnb_class(name)(params, lr=0.1)
    for p in params:
        p.grad = torch.randn_like(p)
    opt.step()
    measured = _update_traffic(opt, params)
    e = params[0].element_size()
    per = optimizer_step_bytes(name, "fused", e, e, e)
    assert per * params[0].numel() == pytest.approx(measured, rel=1e-3)


def bnb_class(name: str) -> Any:
    return {"adamw-8bit": bnb.optim.AdamW8bit, "paged-adamw": bnb.optim.PagedAdamW,
            "paged-adamw-8bit": bnb.optim.PagedAdamW8bit, "lion": bnb.optim.Lion, "lion-8bit": bnb.optim.Lion8bit,
            "paged-lion": bnb.optim.PagedLion,
            "paged-lion-8bit": bnb.optim.PagedLion8bit}[name]


def test_lion_step_bytes_from_the_kernel_source() -> None:
    """Counted from the CUDA kernels (module docstring): 32-bit Lion loads g, the fp32 state1 and p and stores p and
    state1; 8-bit loads the uint8 state1 and its block absmax and stores both. Before, Lion had no count (None:
    its step took 0 s)."""
    for p, g in ((2, 2), (4, 4)):
        assert optimizer_step_bytes("lion", "fused", p, g, p) == 2 * p + g + 2 * 4
        assert optimizer_step_bytes("paged-lion", "fused", p, g, p) == 2 * p + g + 2 * 4
        assert optimizer_step_bytes("paged-lion-8bit", "fused", p, g, p) == 2 * p + g + 2 * 1 + 2 * 4 / 256
    # a master copy (DeepSpeed/Megatron: the update runs on the fp32 master, then the model is copied from it)
    assert optimizer_step_bytes("lion", "fused", 2, 2, 4, master=4) == 2 * 4 + 2 + 8 + (4 + 2)


def test_lion_step_is_timed() -> None:
    """A full bf16 fine-tune of Llama 3.2 1B with Lion on an H100: the step moves 14 B per parameter (2 x 2 B
    weight + 2 B gradient + 2 x 4 B fp32 momentum), timed at the memory-bound bandwidth like AdamW's."""
    from llmsizer.catalog.hardware import builtin_catalog

    dev = builtin_catalog().devices["h100-sxm"]
    spec = load_model("llama-3.2-1b")
    w = dict(method="full", precision="bf16", micro_batch=1, seq_len=2048)
    lion = training_duration_for(spec, dev, 1, 1e6, dict(w, optimizer="lion"))
    sgd = training_duration_for(spec, dev, 1, 1e6, dict(w, optimizer="sgd"))
    assert {a.name: a.value for a in lion.assumptions}["optimizer_step_bytes_per_element"] == 14.0
    assert lion.tokens_per_second < sgd.tokens_per_second  # sgd's step moves 6 B per parameter (eq. O6)


@pytest.mark.parametrize(("name", "per"), [("sgd", 2 * 2 + 2), ("sgd-momentum", 2 * 2 + 2 + 5 * 2),
                                           ("adafactor", 3 * 2 + 3 * 2 + 11 * 2)])
def test_every_torch_optimizer_step_is_timed(name: str, per: float) -> None:
    """A pure bf16 fine-tune of Llama 3.2 1B on an H100 (2 B weights, gradients and states, each optimizer's default
    implementation): SGD's step reads the weight and gradient and writes the weight (eq. O6), SGD with momentum on
    torch's CUDA default foreach also moves its buffer five times (O7), torch's Adafactor, which has no fused path, runs its for-loop (O9); each
    timed at the memory-bound bandwidth AdamW's fused step (2 x 2 + 2 + 4 x 2 = 14 B) is timed at. Before, all three
    took 0 s (no byte count)."""
    from llmsizer.catalog.hardware import builtin_catalog

    dev = builtin_catalog().devices["h100-sxm"]
    spec = load_model("llama-3.2-1b")
    w = dict(method="full", precision="bf16", micro_batch=1, seq_len=2048)
    d = training_duration_for(spec, dev, 1, 1e6, dict(w, optimizer=name))
    adamw = training_duration_for(spec, dev, 1, 1e6, dict(w, optimizer="adamw"))
    assert {a.name: a.value for a in d.assumptions}["optimizer_step_bytes_per_element"] == per
    assert d.step is not None and adamw.step is not None
    assert d.step.optimizer_seconds > 0
    assert d.step.optimizer_seconds / adamw.step.optimizer_seconds == pytest.approx(per / 14)


@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")
@pytest.mark.parametrize("name", [n for n in OPTIMIZERS if OPTIMIZER_INFO[n].paged])
def test_a_paged_optimizer_refused_on_a_cpu_names_the_states_bitsandbytes_keeps_there(name: str) -> None:
    """A paged optimizer on a CPU is refused (specs/training.py) with the optimizer that sizes what bitsandbytes
    0.50.2 does there: it does not page but allocates the same states in RAM (optim/optimizer.py get_state_buffer,
    a warning). The named optimizer, estimated on the CPU, must hold the state bytes of that real CPU run (torch's
    AdamW adds its one-element step tensor per parameter). Before, paged-adamw named plain 'adamw': torch's AdamW,
    whose states follow the parameters (bf16 under bf16 training: half of bitsandbytes' fp32 moments)."""
    with pytest.raises(InputError) as err:
        estimate_training(load_model("llama-3.2-1b"), optimizer=name, precision="bf16", device="cpu")
    msg = str(err.value)
    assert "\n" not in msg
    named = msg.split("size the run as optimizer ", 1)[1].split(" ")
    twin, extra = named[0], dict(optimizer_state_dtype="fp32") if named[1:3] == ["with", "optimizer_state_dtype"] \
        else {}
    assert twin in OPTIMIZERS and not OPTIMIZER_INFO[twin].paged, msg
    est = estimate_training(load_model("llama-3.2-1b"), optimizer=twin, precision="bf16", device="cpu", **extra)
    sd = str({a.name: a.value for a in est.assumptions}["optimizer_state_dtype"])
    measured = tensor_bytes(optimizer_state_tensors(_stepped(name, "bf16")))  # bitsandbytes' paged class on the CPU
    step_tensors = 0 if OPTIMIZER_INFO[twin].bnb else ADAM_STEP_BYTES * len(SHAPES)
    assert optimizer_state_bytes_counted(Counter(SHAPES), twin, DTYPE_BYTES[sd]) - step_tensors == measured, msg


@pytest.mark.parametrize("name", [n for n in OPTIMIZERS if OPTIMIZER_INFO[n].paged])
def test_a_paged_optimizer_refused_on_an_apple_chip_names_an_accepted_one(name: str) -> None:
    """On an Apple chip (Metal: no CUDA unified memory, so bitsandbytes' get_paged has nothing to allocate) the
    refusal names the unpaged optimizer with the same states and bits."""
    with pytest.raises(InputError) as err:
        estimate_training(load_model("llama-3.2-1b"), optimizer=name, device="gpu", gpu_runtime="metal")
    msg = str(err.value)
    named = msg.split("; use ", 1)[1].split(" ")
    twin = named[0]
    assert twin in OPTIMIZERS, msg
    a, b = OPTIMIZER_INFO[name], OPTIMIZER_INFO[twin]
    assert (b.paged, b.states, b.eight_bit) == (False, a.states, a.eight_bit)
    assert (named[1:4] == ["with", "optimizer_state_dtype", "fp32"]) == (not b.bnb), msg


@pytest.mark.parametrize(("name", "device", "impl"), [("sgd", "gpu", "foreach"), ("sgd-momentum", "gpu", "foreach"),
                                                      ("sgd-momentum", "cpu", "for-loop"), ("adafactor", "gpu", "for-loop"),
                                                      ("adamw", "gpu", "fused")])
def test_an_optimizer_with_no_implementation_given_runs_torchs_default(name: str, device: str, impl: str) -> None:
    """Review finding: SGD and Adafactor took AdamW's "fused" default (HF's adamw_torch_fused) and its reason. torch's
    own defaults, read off the installed torch: SGD asks _default_to_fused_or_foreach with use_fused=False (foreach
    where every parameter is on CUDA, else the for-loop); Adafactor keeps foreach=None, which runs the for-loop."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    from llmsizer.estimate.training.compose import estimate_training

    p = [torch.nn.Parameter(torch.randn(4, 4))]
    assert torch.optim.SGD(p, lr=0.1).defaults["foreach"] is None and torch.optim.SGD(p, lr=0.1).defaults["fused"] is None
    assert _default_to_fused_or_foreach(p, differentiable=False, use_fused=False) == (False, False)  # CPU: for-loop
    assert torch.optim.Adafactor(p).defaults["foreach"] is None
    dev = "h100-sxm" if device == "gpu" else "intel-xeon-spr-8ch"
    est = estimate_training("qwen2.5-0.5b", optimizer=name, device=dev, micro_batch=1, seq_len=512,
                            memory=None if device == "gpu" else 64 * 2**30)  # the catalog CPU has no RAM size
    assert {a.name: a.value for a in est.assumptions}["optimizer_impl"] == impl
