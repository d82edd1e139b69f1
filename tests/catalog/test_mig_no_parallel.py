"""review39 D5: `hardware detect` on a MIG capture gave each MIG device the whole H100's NVLink domain (8), and
`fit --device detected-h100-sxm-mig0 --count 2` answered "FITS TP 2". The sources' rules, which these tests check:

- NVIDIA MIG User Guide, "MIG Device Names / Device Enumeration": a CUDA process enumerates one MIG device, however
  many are created or made visible; "Deployment Considerations / Application Considerations": no GPU-to-GPU P2P
  (PCIe or NVLink) between MIG devices. So a MIG device has no NVLink domain of the card's 8.
- NVIDIA/nccl#1716 (maintainer, 2025-05-23): NCCL's topology code takes one PCI device as one GPU and one rank,
  and MIG devices of one GPU share it; so no tensor- or pipeline-parallel group (vLLM/SGLang) and no
  torch.distributed training group runs over them. Several MIG devices serve as replicas, one model each.

The truths: the MIG Device sections of the real capture (tests/fixtures/real_outputs), the catalog's own h100-sxm
row (which does state nvlink_domain 8: the field the MIG devices must not inherit), and the replica rule (two
replicas each carry half the load: the answer on one MIG device at half the concurrency)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer.catalog.detect import Output, detect
from llmsizer.catalog.hardware import load_catalog
from llmsizer.errors import DeviceCannotRunError
from llmsizer.estimate.fit import fit, fit_training

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
MIG_Q = REAL / "nvidia-smi-q" / "h100-80gb-hbm3-mig.txt"
WHOLE_Q = REAL / "nvidia-smi-q" / "h100-80gb-hbm3.txt"


def _file(tmp_path: Path, q: Path) -> tuple[Path, list[str]]:
    det = detect([Output("nvidia-smi-q", q.read_text("utf-8"), "nvidia-smi-q", q.name, "2026-12-07")])
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(det.document), "utf-8")
    return f, [d.id for d in det.devices]


def test_mig_devices_state_mig_and_no_nvlink_domain_of_the_card(tmp_path: Path) -> None:
    assert "MIG Device" in MIG_Q.read_text("utf-8")  # the capture lists its MIG devices
    card = load_catalog().device("h100-sxm")
    assert card.nvlink_domain is not None and card.nvlink_domain.base == 8  # what a copy of the card would carry
    f, ids = _file(tmp_path, MIG_Q)
    devs = load_catalog([f]).devices
    assert len(ids) == MIG_Q.read_text("utf-8").count("MIG Device\n")
    for i in ids:
        d = devs[i]
        assert d.nvlink_domain is None and d.peer_to_peer is None  # no NVLink peer, no P2P (MIG guide)
        assert d.mig is not None and d.mig.base is True
    whole, wids = _file(tmp_path, WHOLE_Q)
    w = load_catalog([whole]).devices[wids[0]]
    assert w.mig is None and w.nvlink_domain is not None and w.nvlink_domain.base == 8  # a whole GPU keeps both


def test_several_mig_devices_are_replicas_not_tensor_parallel(tmp_path: Path) -> None:
    f, ids = _file(tmp_path, MIG_Q)
    two = fit("qwen2.5-7b", ids[0], 2, engine="vllm", concurrency=8, hardware_files=[f], fits_at=False)
    one = fit("qwen2.5-7b", ids[0], 1, engine="vllm", concurrency=4, hardware_files=[f], fits_at=False)
    assert (two.tensor_parallel, two.replicas) == (1, 2)  # was TP 2
    assert two.memory_per_device == one.memory_per_device and two.fits == one.fits  # each replica: half the load
    assert not any("NVLink domain" in w for w in two.all_warnings)


@pytest.mark.parametrize("argv,flag", [(("--count", "2", "--engine", "vllm", "--tp", "2"), "--tp"),
                                       (("--count", "2", "--engine", "vllm", "--pp", "2"), "--pp"),
                                       (("--count", "2", "--engine", "sglang", "--tp", "2"), "--tp"),
                                       (("--count", "2", "--train"), "--count")])
def test_parallel_groups_over_mig_devices_are_refused_in_one_line(tmp_path: Path, argv: tuple[str, ...],
                                                                  flag: str) -> None:
    f, ids = _file(tmp_path, MIG_Q)
    code, out, err = run("fit", "qwen2.5-0.5b", "--device", ids[0], "--hardware-file", str(f), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert flag in err and "MIG" in err and "nccl#1716" in err


def test_the_python_api_and_train_refuse_alike(tmp_path: Path) -> None:
    f, ids = _file(tmp_path, MIG_Q)
    with pytest.raises(DeviceCannotRunError, match="MIG"):
        fit("qwen2.5-0.5b", ids[0], 2, engine="vllm", tensor_parallel=2, hardware_files=[f])
    with pytest.raises(DeviceCannotRunError, match="MIG"):
        fit_training("qwen2.5-0.5b", ids[0], 2, hardware_files=[f])
    code, _, err = run("train", "qwen2.5-0.5b", "--device", ids[0], "--hardware-file", str(f), "--gpus", "2")
    assert code == 2 and "--gpus" in err and "MIG" in err
    assert fit_training("qwen2.5-0.5b", ids[0], 1, hardware_files=[f]).fits  # one MIG device: a run of its own


# review40 D2: llama.cpp's split over MIG devices. The rule's sources: llama.cpp's CUDA backend takes its devices from
# cudaGetDeviceCount (ggml_cuda_init, ggml/src/ggml-cuda/ggml-cuda.cu:221-234 at llama.cpp@0c1e57098), and CUDA gives
# a process one MIG device (MIG User Guide, Device Enumeration): one llama.cpp process has one MIG device to put layers
# on. So infer's split (--gpus, --tensor-split) is refused as fit's --tensor-split is, and fit's layout on several
# MIG devices (replicas, one model each) is the one infer gives a single MIG device at each replica's share.
_LLAMA = ("--engine", "llamacpp", "--weights", "q4_k_m")


@pytest.mark.parametrize("command,argv,flag", [("infer", ("--gpus", "2"), "--gpus"),
                                               ("infer", ("--tensor-split", "1,1"), "--tensor-split"),
                                               ("fit", ("--count", "2", "--tensor-split", "1,1"), "--tensor-split")])
def test_llamacpp_split_over_mig_devices_is_refused_in_one_line(tmp_path: Path, command: str,
                                                                argv: tuple[str, ...], flag: str) -> None:
    f, ids = _file(tmp_path, MIG_Q)
    code, out, err = run(command, "qwen2.5-0.5b", "--device", ids[0], "--hardware-file", str(f), *_LLAMA, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert flag in err and "MIG" in err and "cudaGetDeviceCount" in err and "Device Enumeration" in err


def test_llamacpp_on_mig_devices_infer_and_fit_agree_on_replicas(tmp_path: Path) -> None:
    f, ids = _file(tmp_path, MIG_Q)
    two = fit("qwen2.5-0.5b", ids[0], 2, engine="llamacpp", weights="q4_k_m", concurrency=4, hardware_files=[f],
              fits_at=False)
    assert (two.tensor_parallel, two.replicas, two.layer_split) == (1, 2, False)
    one = fit("qwen2.5-0.5b", ids[0], 1, engine="llamacpp", weights="q4_k_m", concurrency=2, hardware_files=[f],
              fits_at=False)
    assert two.memory_per_device == one.memory_per_device  # one replica = one MIG device at half the load
    code, out, err = run("infer", "qwen2.5-0.5b", "--device", ids[0], "--hardware-file", str(f), *_LLAMA,
                         "--concurrency", "2")
    assert code == 0 and "GPU1" not in out, err  # infer on one MIG device: no split placement
    # on whole GPUs the same fit is one copy split over both (the rule is the MIG device's, not llama.cpp's)
    whole, wids = _file(tmp_path, WHOLE_Q)
    assert fit("qwen2.5-0.5b", wids[0], 2, engine="llamacpp", weights="q4_k_m", hardware_files=[whole],
               fits_at=False).layer_split
