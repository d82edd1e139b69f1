"""vLLM 0.10.0-0.11.0 sample the profile run's dummy batch through FlashInfer on CUDA (estimate/engines.py
VLLM_FLASHINFER_SAMPLER_RELEASES), which holds far less than the PyTorch-native sort of later releases.

The bytes are rebuilt here from the tensors the code allocates, not from llmsizer's output. vllm 0.10.2 (PyPI wheel):
gpu_model_runner.py:2849 ``logits = self.model.compute_logits(hidden_states, None)`` (model dtype, held by the caller
while the sampler runs) with ``top_p=0.9`` and ``top_k=vocab - 1`` (2859-2860); sampler.py:87
``logits = logits.to(torch.float32)``; sampler.py:134 ``logits.div_(temp)`` (in place); topk_topp_sampler.py:49-60
picks ``forward_cuda`` with VLLM_USE_FLASHINFER_SAMPLER unset, whose line 251 calls
``flashinfer.sampling.top_k_top_p_sampling_from_logits``; flashinfer 0.3.0 sampling.py:980-981
``masked_logits = top_k_mask_logits(logits, top_k)`` (``torch.empty_like``, :374) and
``probs = torch.softmax(masked_logits, dim=-1)``. The dummy batch has min(max_num_tokens, max_num_seqs) requests
(gpu_model_runner.py:2702), 1024 on an H100 (engine/arg_utils.py:1669-1678: >= 70 GiB and not an A100).

gpustack's performance lab ran `vllm serve openai/gpt-oss-120b --max-model-len 32768` on one H100 SXM with vLLM
0.10.2 (gpustack docs/performance-lab/gpt-oss-120b/h100.md @47277d79, its runner image installing flashinfer 0.3.0:
gpustack/runner pack/cuda/Dockerfile @abc9b3e): the model started.
"""

from __future__ import annotations

from llmsizer import estimate_inference
from llmsizer.catalog.models import entries

MODEL = "gpt-oss-120b"


def _flashinfer_sampler_bytes() -> int:
    cfg = entries()[MODEL].config
    vocab = cfg["vocab_size"]
    assert vocab == 201088  # logits in bf16, the checkpoint's dtype (vLLM dtype auto)
    reqs = min(8192, 1024)  # max_num_batched_tokens, max_num_seqs: vllm serve's H100 defaults
    bf16_logits, fp32_logits, masked_logits, probs = 2, 4, 4, 4
    return reqs * vocab * (bf16_logits + fp32_logits + masked_logits + probs)


def _activations(**kw: object) -> int:
    est = estimate_inference(MODEL, engine="vllm", device="h100-sxm", context=32768, **kw)
    return next(i.bytes for i in est.items if i.name == "activations")


def test_vllm_0_10_profiles_the_flashinfer_sampler() -> None:
    """The sampler (2.69 GiB) is above the forward over 8192 tokens, so it is the profiled activation."""
    assert _activations(engine_version="0.10.2") == _flashinfer_sampler_bytes()
    assert _activations(engine_version="0.11.0") == _flashinfer_sampler_bytes()


def test_later_releases_keep_the_native_sort() -> None:
    """From vllm-project/vllm#26859 FlashInfer sampling is opt-in (0.14.1 topk_topp_sampler.py:35): the llm-d
    figure of the native path (7.38 GiB for gpt-oss-120b on one H100) stands, about 2.8 times FlashInfer's."""
    native = _activations(engine_version="0.14")
    assert native > 2.5 * _flashinfer_sampler_bytes()
    assert abs(native / 2**30 - 7.38) < 0.15


def test_the_patch_releases_of_0_11_after_the_change_sort_natively() -> None:
    """vllm-project/vllm#26859 landed between 0.11.0 and 0.11.1: the 0.11.1 wheel's topk_topp_sampler.py (lines
    34-47) takes forward_cuda only when VLLM_USE_FLASHINFER_SAMPLER is set (probe29 D1). So 0.11.1 and 0.11.2 hold the
    native sort's figure, as 0.14 does; '0.11' is 0.11.0."""
    native = _activations(engine_version="0.14")
    assert _activations(engine_version="0.11.1") == native
    assert _activations(engine_version="0.11.2") == native
    assert _activations(engine_version="0.11") == _flashinfer_sampler_bytes()


def test_gpt_oss_120b_starts_on_one_h100_under_vllm_0_10_2() -> None:
    """gpustack's run: vLLM 0.10.2 started gpt-oss-120b at --max-model-len 32768 on one H100 SXM; under the
    native sort (0.14) the same start-up has no room for KV blocks (the pool is exceeded)."""
    est = estimate_inference(MODEL, engine="vllm", device="h100-sxm", context=32768, engine_version="0.10.2")
    assert est.details["fits"]
    later = estimate_inference(MODEL, engine="vllm", device="h100-sxm", context=32768, engine_version="0.14")
    assert not later.details["fits"]


def test_no_flashinfer_sampler_without_cuda() -> None:
    """FlashInfer's sampler is CUDA's (topk_topp_sampler.py:41 ``current_platform.is_cuda()``): on an MI300X the
    native figure stays."""
    est = estimate_inference(MODEL, engine="vllm", device="mi300x", context=32768, engine_version="0.10.2")
    act = next(i for i in est.items if i.name == "activations")
    assert "native sort" in act.formula and not any(a.name == "vllm_sampler" for a in est.assumptions)
