"""fit's speed memo (estimate/fit.py ``_speed_cached``) is shared by devices alike in what the speed estimate reads:
two devices with the same kind, bandwidth and peaks but another vendor or architecture (llama.cpp's kernel path,
stream cap and Hopper mma share read them) are two estimates. The truth for each device is its own answer with
every memo cleared, whatever device was asked first (the 5,000-entry recommend gave rtx-a6000-var662 the speed of
an earlier device: 22.37 tokens/s per user where `fit` on it alone gives 24.84)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit
from llmsizer.estimate.speed import SpeedEstimate

BASE = {"kind": "gpu", "form_factor": "desktop", "memory": "48GiB", "memory_bandwidth": "900 GB/s",
        "flops": {"bf16": "150 TFLOP/s", "fp16": "150 TFLOP/s", "int8": "300 TFLOP/s"}}
TWINS = [{**BASE, "id": "twin-nvidia", "name": "Twin NVIDIA", "vendor": "nvidia", "architecture": "ampere"},
         {**BASE, "id": "twin-amd", "name": "Twin AMD", "vendor": "amd"},
         {**BASE, "id": "twin-hopper", "name": "Twin Hopper", "vendor": "nvidia", "architecture": "hopper"}]


def _speed(device: str, path: Path) -> tuple[float | None, float | None]:
    r = fit("llama-3.1-8b", device, hardware_files=[path], engine="llamacpp", weights="q4_k_m", context=4096)
    assert r.speed is not None
    return r.speed.ttft_seconds, r.speed.tokens_per_second_per_user


@pytest.mark.parametrize("first", [t["id"] for t in TWINS])
def test_each_device_gets_its_own_speed_whatever_came_first(tmp_path: Path, first: str) -> None:
    path = tmp_path / "twins.json"
    path.write_text(json.dumps({"devices": TWINS}), encoding="utf-8")
    alone = {}
    for t in TWINS:
        clear_caches()
        alone[t["id"]] = _speed(t["id"], path)
    assert len(set(alone.values())) > 1  # the twins differ (else the test could not fail)
    clear_caches()
    _speed(first, path)
    for t in TWINS:
        assert _speed(t["id"], path) == alone[t["id"]], (first, t["id"])


# identical in every number, unlike in id; no bf16 rate (peak_dtype names the device) and few SMs for their memory
# (llama.cpp's stream cap, llamacpp_sm_stream_limit, names the device): 10 SMs x 4e12 / (2 x 1280) cycles/s
_SAME = {"kind": "gpu", "form_factor": "desktop", "memory": "48GiB", "memory_bandwidth": "900 GB/s",
         "vendor": "NVIDIA", "architecture": "ampere", "sm_count": 10, "fp32_cores": 1280,
         "flops": {"fp16": "150 TFLOP/s", "fp32": "4 TFLOP/s", "int8": "300 TFLOP/s"}}
SAME_NUMBERS = [{**_SAME, "id": "alike-one", "name": "Alike One"}, {**_SAME, "id": "alike-two", "name": "Alike Two"}]


def test_devices_alike_in_numbers_each_name_their_own_id(tmp_path: Path) -> None:
    """The memo must not hand one device's assumption texts (which name it) to another device with the same
    numbers: each answer names its own id and never the other's, whichever was asked first, and equals (texts and
    numbers) that device's answer with every memo cleared."""
    path = tmp_path / "alike.json"
    path.write_text(json.dumps({"devices": SAME_NUMBERS}), encoding="utf-8")
    ids = [d["id"] for d in SAME_NUMBERS]

    def speed(dev: str) -> SpeedEstimate:
        r = fit("llama-3.1-8b", dev, hardware_files=[path], engine="llamacpp", weights="q4_k_m", context=4096)
        assert r.speed is not None
        return r.speed

    alone = {}
    for dev in ids:
        clear_caches()
        alone[dev] = speed(dev)
    for asked in (ids, ids[::-1]):
        clear_caches()
        for dev in asked:
            sp = speed(dev)
            assert sp.device == dev
            why = {a.name: a.why for a in sp.assumptions}
            other = next(i for i in ids if i != dev)
            for name in ("peak_dtype", "llamacpp_sm_stream_limit"):
                assert dev in why[name] and other not in why[name], (dev, name, why[name])
            assert not any(other in w for w in sp.warnings)
            assert (sp.assumptions, sp.warnings, sp.ttft_seconds, sp.tokens_per_second_per_user) == (
                alone[dev].assumptions, alone[dev].warnings, alone[dev].ttft_seconds,
                alone[dev].tokens_per_second_per_user)


def test_for_device_replaces_the_id_only_where_it_stands_whole(tmp_path: Path) -> None:
    path = tmp_path / "alike.json"
    path.write_text(json.dumps({"devices": SAME_NUMBERS}), encoding="utf-8")
    clear_caches()
    r = fit("llama-3.1-8b", "alike-one", hardware_files=[path], engine="llamacpp", weights="q4_k_m", context=4096)
    assert r.speed is not None
    from dataclasses import replace

    from llmsizer.estimate.speed import for_device
    sp = replace(r.speed, warnings=("alike-one: x; alike-one-b and xalike-one stay; ends alike-one.", "alike-onealike-one"))
    assert for_device(sp, "z").warnings == ("z: x; alike-one-b and xalike-one stay; ends z.", "alike-onealike-one")


def _no_peer_twin(tmp_path: Path) -> tuple[Path, str, str]:
    """A hardware-file device with every number of a catalog GPU that has no peer-to-peer access (its row's
    ``peer_to_peer: false``), under another id and without that field (so it is taken as one that has)."""
    from llmsizer.catalog.hardware import _read_builtin

    real = "rtx-4090"
    raw = next(d for d in _read_builtin("accelerators.json")["devices"] if d["id"] == real)
    assert raw["peer_to_peer"]["value"] is False
    twin = {k: v for k, v in raw.items() if k != "peer_to_peer"}
    twin.update(id=f"{real}-p2p-twin", name=f"{raw['name']} (peer-to-peer twin)", aliases=[])
    path = tmp_path / "twin.json"
    path.write_text(json.dumps({"devices": [twin]}), encoding="utf-8")
    return path, real, twin["id"]


@pytest.mark.parametrize("first", [0, 1])
def test_peer_to_peer_is_its_own_speed_whichever_came_first(tmp_path: Path, first: int) -> None:
    """estimate_speed reads the device's ``peer_to_peer`` for the tensor-parallel all-reduce (vLLM's custom
    all-reduce needs peer-to-peer, else NCCL: engines.tp_allreduce): a TP-2 vLLM answer on the GPU without it and
    on its twin with it are two estimates, each equal to its own answer with every memo cleared. The memo key
    (fit.py ``_speed_cached``) keeps them apart twice today: the flag, and the device id it scopes vLLM / SGLang
    keys by (the serving band); the test fails with both taken out, passes with either one alone."""
    path, real, twin = _no_peer_twin(tmp_path)
    ids = [real, twin]

    def speed(dev: str) -> SpeedEstimate:
        r = fit("llama-3.1-8b", dev, 2, engine="vllm", hardware_files=[path], context=4096)
        assert r.tensor_parallel == 2 and r.speed is not None
        return r.speed

    alone = {}
    for dev in ids:
        clear_caches()
        alone[dev] = speed(dev)
    kernels = {dev: next(str(a.value) for a in alone[dev].assumptions if a.name == "tp_allreduce") for dev in ids}
    assert "NCCL" in kernels[real] and "custom" in kernels[twin]  # the flag changes the answer (else no test)
    clear_caches()
    for dev in ids[first:] + ids[:first]:
        sp = speed(dev)
        assert (sp.device, sp.assumptions, sp.warnings, sp.ttft_seconds, sp.tokens_per_second_per_user) == (
            dev, alone[dev].assumptions, alone[dev].warnings, alone[dev].ttft_seconds,
            alone[dev].tokens_per_second_per_user), (ids[first], dev)


def test_a_twin_stating_no_peer_to_peer_gets_the_nccl_all_reduce_of_the_rtx_4090(tmp_path: Path) -> None:
    """A hardware-file copy of the RTX 4090 under another id with ``peer_to_peer: false`` (YAML, a bare boolean)
    takes vLLM's NCCL all-reduce at TP 2, as the RTX 4090 does (vLLM's custom all-reduce needs peer-to-peer:
    engines.tp_allreduce), with the same speed; before the field the rule matched catalog ids and it got the custom
    kernel. Its assumption names the file the flag came from."""
    from llmsizer.catalog.hardware import _read_builtin

    raw = next(d for d in _read_builtin("accelerators.json")["devices"] if d["id"] == "rtx-4090")
    twin = {k: v for k, v in raw.items() if k != "peer_to_peer"}
    twin.update(id="my-4090", name="my 4090", aliases=[], peer_to_peer=False)
    path = tmp_path / "mine.yaml"
    path.write_text(json.dumps({"devices": [twin]}), encoding="utf-8")
    out = {}
    for dev in ("rtx-4090", "my-4090"):
        clear_caches()
        r = fit("llama-3.1-8b", dev, 2, engine="vllm", hardware_files=[path], context=4096)
        assert r.tensor_parallel == 2 and r.speed is not None
        out[dev] = r.speed
    ar = {dev: next(a for a in out[dev].assumptions if a.name == "tp_allreduce") for dev in out}
    assert "NCCL" in str(ar["my-4090"].value) and ar["my-4090"].value == ar["rtx-4090"].value
    assert "my-4090 peer_to_peer false" in ar["my-4090"].why and "user:mine.yaml" in ar["my-4090"].why
    assert (out["my-4090"].ttft_seconds, out["my-4090"].tokens_per_second_per_user) == (
        out["rtx-4090"].ttft_seconds, out["rtx-4090"].tokens_per_second_per_user)


@pytest.mark.parametrize(("value", "said"), [('"no"', "must be true or false"), ("1", "must be true or false"),
                                             ('{"value": false, "unit": "GB"}', "is not 'flag'")])
def test_a_bad_peer_to_peer_is_one_line_naming_file_and_field(tmp_path: Path, value: str, said: str) -> None:
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.errors import InputError

    path = tmp_path / "bad.json"
    path.write_text('{"devices": [{"id": "b", "name": "b", "kind": "gpu", "memory": "24GiB", "peer_to_peer": '
                    + value + "}]}", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_catalog([path])
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "devices[b].peer_to_peer" in msg and said in msg, msg
