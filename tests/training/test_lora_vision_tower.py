"""Named LoRA targets on vision-language models adapt what PEFT's suffix match adapts: the decoder's q/k/v/o and
gate/up/down projections and every vision-tower linear of the same module name (peft 0.21.2 tuners/tuners_utils.py
``check_target_module_exists``, lines 2372-2376; formulas/lora.py ``VISION_MODULES``), and Llama-3.2-Vision's
cross-attention projections, which share the self-attention's names.

Truth: ``peft.get_peft_model`` with ``LoraConfig(target_modules=[q_proj, ..., down_proj])`` on the real transformers
model built on the meta device from the catalog's config.json, counting its trainable parameters; and the names of
the tower modules PEFT wrapped, against the module names the estimate's LoRA assumption states. Under 'all-linear'
the Qwen-VL patch mergers and Mllama's projector too.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from llmsizer.formulas.lora import DECODER_MODULES, lora_params, vision_targets
from llmsizer.models import load_model
from llmsizer.specs.training import DECODER_LINEAR
from oracle_utils import build

peft = pytest.importorskip("peft")

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
NAMED = [DECODER_MODULES[t] for t in DECODER_LINEAR]  # q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj
TOWER = ("visual.", "vision_tower.", "vision_model.")  # the towers' attribute names in the four models


def _peft(name: str, targets: object) -> object:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return peft.get_peft_model(build(cfg), peft.LoraConfig(r=16, target_modules=targets, lora_dropout=0.0))


# one per vision encoder of formulas/lora.py VISION_MODULES (Qwen2.5-VL, SigLIP, Mllama, Qwen3-VL, Llama 4)
@pytest.fixture(scope="module", params=["qwen2.5-vl-7b-instruct", "gemma-3-4b-it", "llama-3.2-11b-vision-instruct",
                                        "qwen3-vl-4b-instruct", "llama-4-scout-17b-16e-instruct"])
def peft_model(request: pytest.FixtureRequest) -> tuple[str, object]:
    return request.param, _peft(request.param, NAMED)


def test_default_targets_count_matches_peft(peft_model: tuple[str, object]) -> None:
    name, pm = peft_model
    assert lora_params(load_model(name), 16, DECODER_LINEAR).total == pm.get_nb_trainable_parameters()[0]  # type: ignore[attr-defined]


def test_named_tower_modules_are_those_peft_wrapped(peft_model: tuple[str, object]) -> None:
    name, pm = peft_model
    wrapped = {n.rsplit(".", 1)[1] for n, m in pm.named_modules()  # type: ignore[attr-defined]
               if hasattr(m, "lora_A") and any(t in n for t in TOWER)}
    assert set(vision_targets(load_model(name), DECODER_LINEAR)) == wrapped


# 'all-linear' on the Qwen-VL towers: Qwen3-VL's patch merger and DeepStack mergers (linear_fc1/2 each) and its MoE
# text model's nn.Parameter router (formulas/lora.py PARAMETER_ROUTERS) as PEFT finds them; Mllama's projector and
# cross-attention
@pytest.mark.parametrize("name", ["qwen3-vl-4b-instruct", "qwen3-vl-30b-a3b-instruct", "qwen2.5-vl-7b-instruct",
                                  "llama-3.2-11b-vision-instruct"])
def test_all_linear_count_matches_peft(name: str) -> None:
    pm = _peft(name, "all-linear")
    assert lora_params(load_model(name), 16, "all-linear").total == pm.get_nb_trainable_parameters()[0]  # type: ignore[attr-defined]


def test_gemma4_named_targets_refused_by_peft_and_the_regex_counted() -> None:
    """Gemma 4's towers hold their projections in Gemma4ClippableLinear: PEFT refuses the named list, and the estimate
    warns, giving the language-model regex whose PEFT count is the estimate's."""
    name = "gemma-4-e2b-it"
    with pytest.raises(ValueError, match="Gemma4ClippableLinear"):
        _peft(name, NAMED)
    from llmsizer import estimate_training
    warned = [w for w in estimate_training(name, method="lora", micro_batch=1, seq_len=1024).warnings
              if "PEFT refuses" in w]
    assert len(warned) == 1
    regex = warned[0].split("such as r'", 1)[1].split("'", 1)[0]
    pm = _peft(name, regex)
    assert lora_params(load_model(name), 16, DECODER_LINEAR).total == pm.get_nb_trainable_parameters()[0]  # type: ignore[attr-defined]
