"""A name query matches name words, not any run of letters (probe24 C3): `models 7b` listed gemma-2-27b and
llama-4-scout-17b, `hardware list m3` listed gh200 (its name holds 'HBM3'). One rule, ``suggest.matches_name``, serves
the catalog searches of models and hardware, so the CLI, the web API and the Python API answer alike. The expected
lists below are written from the catalog ids by hand, not from the function's output."""

from __future__ import annotations

import json

import pytest

from llmsizer.catalog import hardware, models
from llmsizer.cli.main import main
from llmsizer.suggest import matches_name, name_words, split_name_words


@pytest.mark.parametrize(("query", "name", "hit"), [
    ("7b", "Qwen/Qwen2.5-7B", True),
    ("7b", "meta-llama/Llama-2-7b-hf", True),
    ("7b", "google/gemma-2-27b-it", False),  # 27b is another word
    ("7b", "meta-llama/Llama-4-Scout-17B-16E-Instruct", False),
    ("7b", "Qwen/Qwen3-1.7B", False),  # a decimal number is one word
    ("7b", "mistralai/Mixtral-8x7B-v0.1", False),
    ("m3", "apple-m3-pro-18gb", True),
    ("m3", "NVIDIA GH200 (96 GB HBM3)", False),
    ("m4", "a100-sxm4-80gb", False),
    ("qwen", "Qwen/Qwen2.5-7B", True),  # the last word may be a word's beginning
    ("qwen2.5-7", "Qwen/Qwen2.5-7B", True),
    ("qwen2.5-7", "Qwen/Qwen2.5-72B-Instruct", True),
    ("lama", "meta-llama/Llama-3.1-8B", False),  # a word's middle is not its beginning
    ("llama 3.1", "meta-llama/Llama-3.1-8B", True),  # separators aside
    ("LLAMA_3.1-8b", "meta-llama/Llama-3.1-8B", True),  # case aside
    ("llama-3", "meta-llama/Llama-3.1-8B", True),
    ("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B", False),  # every word of the query is needed
    ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B", True),  # an exact id
    ("aws-p5.48xlarge", "aws-p5.48xlarge", True),
    ("48xlarge", "aws-p5.48xlarge", True),
    ("", "anything", True),  # blank: every name
    ("  ", "anything", True),
    ("--", "a-b", False),  # no letter or digit: no name
    # review36 D3: a version number after letters is found by itself and beside the family's name
    ("2.5", "Qwen/Qwen2.5-7B", True),
    ("qwen 2.5", "Qwen/Qwen2.5-7B", True),
    ("qwen2.5", "Qwen/Qwen2.5-7B", True),
    ("3.1", "deepseek-ai/DeepSeek-V3.1", True),
    ("2.5", "Qwen/Qwen3-1.7B", False),
    ("h100", "azure-standard_nd96isr_h100_v5", True),
    ("100", "NVIDIA H100 SXM5 80GB", True),
    ("b200", "NVIDIA GB200", False),  # gb200 is another word either way
    ("m3", "NVIDIA GH200 (96 GB HBM3)", False),  # hbm is not m, read either way
])
def test_matches_name(query: str, name: str, hit: bool) -> None:
    assert matches_name(query, (name,)) is hit


def test_words() -> None:
    assert name_words("Qwen/Qwen3-1.7B") == ("qwen", "qwen3", "1.7b")
    assert name_words("meta-llama/Llama-3.1-8B") == ("meta", "llama", "llama", "3.1", "8b")
    assert name_words("Qwen/Qwen2.5-7B") == ("qwen", "qwen2", "5", "7b")
    assert name_words("azure-standard_nd96isr_h100_v5") == ("azure", "standard", "nd96isr", "h100", "v5")
    assert split_name_words("Qwen/Qwen2.5-7B") == ("qwen", "qwen", "2.5", "7b")
    assert split_name_words("aws-p5.48xlarge") == ("aws", "p", "5.48xlarge")
    assert split_name_words("mistralai/Mixtral-8x7B-v0.1") == ("mistralai", "mixtral", "8x7b", "v", "0.1")


def test_models_7b_lists_7b_models_only() -> None:
    ids = {e.id for e in models.search("7b")}
    assert {"Qwen/Qwen2.5-7B", "meta-llama/Llama-2-7b-hf", "mistralai/Mistral-7B-v0.1"} <= ids
    assert not ids & {"google/gemma-2-27b-it", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "Qwen/Qwen3-1.7B"}
    assert all("7b" in name_words(e.id) for e in models.search("7b"))


def test_exact_ids_and_prefixes_still_find_their_models() -> None:
    assert [e.id for e in models.search("meta-llama/Llama-3.1-8B")] == ["meta-llama/Llama-3.1-8B"]
    assert [e.id for e in models.search("llama-3.1-8b")] == ["meta-llama/Llama-3.1-8B"]
    assert {e.id for e in models.search("qwen3")} >= {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B"}
    assert [e.id for e in models.search("qwen3-0")] == ["Qwen/Qwen3-0.6B"]


def test_hardware_m3_lists_apple_m3_chips_not_hbm3() -> None:
    found = hardware.search("m3")
    assert found and all(d.id.startswith("apple-m3") for d in found)
    assert "gh200" not in {d.id for d in found}
    assert {d.id for d in hardware.search("h100")} >= {"h100-sxm", "h100-pcie", "h100-nvl"}
    assert "gb200" not in {d.id for d in hardware.search("b200")}


def test_cli_models_and_hardware_list_use_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "7b", "--json"]) == 0
    ids = {m["id"] for m in json.loads(capsys.readouterr().out)["models"]}
    assert ids == {e.id for e in models.search("7b")} and "google/gemma-2-27b-it" not in ids
    assert main(["hardware", "list", "m3", "--json"]) == 0
    devices = {d["id"] for d in json.loads(capsys.readouterr().out)["devices"]}
    assert "apple-m3-pro-18gb" in devices and "gh200" not in devices
    with pytest.raises(SystemExit):
        main(["models", "--help"])
    assert "'7b' finds" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def test_a_name_followed_by_a_memory_size_suggests_the_name_first():
    """probe27 D3: the did-you-mean rule of models and devices (suggest.close_matches): a word that is an option, or
    an alias of one, followed by a memory size offers that option first; other words are untouched."""
    from llmsizer.suggest import close_matches, named_then_memory
    opts = ["a100-sxm-80gb", "a100-sxm-40gb", "apple-m4-pro-48gb", "a40"]
    assert close_matches("a40-48gb", opts, n=3, cutoff=0.4)[0] == "a40"
    assert named_then_memory("nvidia-a40 48GB", {"nvidia-a40": "a40"}) == ["a40"]
    assert named_then_memory("qwen2.5-7b-16gb", {"qwen2.5-7b": "qwen2.5-7b"}) == ["qwen2.5-7b"]
    assert named_then_memory("a40-48", {"a40": "a40"}) == []  # no unit: not a memory size
    assert named_then_memory("a40x-48gb", {"a40": "a40"}) == []  # 'a40x' is another word
    assert named_then_memory("a40", {"a40": "a40"}) == []
