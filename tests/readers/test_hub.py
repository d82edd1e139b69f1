"""spec_from_hub without the network: the missing-package, offline and failure paths, and a faked Hub."""

import json
import sys
import types

import pytest
from readers_helpers import LLAMA_CONFIG, llama_shapes, random_arrays, write_folder

from llmsizer.errors import HubUnavailableError, LlmsizerError, ModelFileError, UnknownNameError
from llmsizer.readers.hf_folder import spec_from_folder
from llmsizer.readers.safetensors_header import read_header


@pytest.fixture(autouse=True)
def _online(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from llmsizer.readers import hub

    monkeypatch.setattr(hub, "reachable", lambda hf, timeout=hub.REACH_TIMEOUT_S: True)  # the faked Hub answers


def test_an_unreachable_hub_fails_in_one_line_within_seconds(tmp_path):
    """The real huggingface_hub against an endpoint that refuses connections retried for ~23 s before its error;
    one short connection attempt first gives the one-line error at once (exit 2)."""
    import os
    import subprocess
    import time

    pytest.importorskip("huggingface_hub")
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"))
    env.pop("HF_HUB_OFFLINE", None)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "infer", "some-org/some-model", "--hub"],
                       capture_output=True, text=True, env=env, timeout=60)
    took = time.monotonic() - t
    assert r.returncode == 2 and took < 10, (r.returncode, took)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot be reached" in lines[0] and "Traceback" not in r.stderr


def _fake_hub(monkeypatch, download, metadata=None):
    """Install a stand-in ``huggingface_hub`` module that never touches the network."""
    calls = []

    def hf_hub_download(repo_id, filename, revision=None, local_files_only=False):
        calls.append(("download", repo_id, filename, local_files_only))
        return download(repo_id, filename)

    fake = types.SimpleNamespace(hf_hub_download=hf_hub_download)
    if metadata is not None:
        def get_safetensors_metadata(repo_id, revision=None):
            calls.append(("metadata", repo_id))
            return metadata(repo_id)
        fake.get_safetensors_metadata = get_safetensors_metadata
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    return calls


def _repo_metadata(folder):
    """What huggingface_hub.get_safetensors_metadata returns, built from a local file's header."""
    from huggingface_hub.utils._safetensors import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

    path = folder / "model.safetensors"
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    header.pop("__metadata__", None)
    tensors = {k: TensorInfo(dtype=v["dtype"], shape=v["shape"], data_offsets=tuple(v["data_offsets"]))
               for k, v in header.items()}
    files = {"model.safetensors": SafetensorsFileMetadata(metadata={}, tensors=tensors)}
    return SafetensorsRepoMetadata(metadata=None, sharded=False, weight_map={k: "model.safetensors" for k in tensors},
                                   files_metadata=files)


def test_missing_package_says_how_to_install(monkeypatch):
    from llmsizer.readers.hub import spec_from_hub

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub -> ImportError
    with pytest.raises(HubUnavailableError) as e:
        spec_from_hub("meta-llama/Llama-3.1-8B")
    assert "llmsizer[hub]" in str(e.value) and "\n" not in str(e.value)


def test_offline_without_a_cached_config_uses_no_network(monkeypatch, tmp_path):
    pytest.importorskip("huggingface_hub")
    import huggingface_hub

    from llmsizer.readers.hub import spec_from_hub

    seen = []
    real = huggingface_hub.hf_hub_download

    def cache_only(repo_id, filename, revision=None, local_files_only=False):
        seen.append(local_files_only)
        assert local_files_only, "offline mode must not reach the network"
        return real(repo_id, filename, revision=revision, local_files_only=True, cache_dir=str(tmp_path))

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", cache_only)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as e:
        spec_from_hub("llmsizer-tests/not-a-real-repo")
    assert "HF_HUB_OFFLINE" in str(e.value) and "\n" not in str(e.value)
    assert seen == [True]


def test_offline_with_a_cached_config_skips_the_headers(monkeypatch, tmp_path):
    from llmsizer.readers.hub import spec_from_hub

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    calls = _fake_hub(monkeypatch, lambda r, f: tmp_path / f, metadata=lambda r: pytest.fail("no headers offline"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = spec_from_hub("org/tiny")
    assert spec.file_weights is None and any("HF_HUB_OFFLINE" in n for n in spec.notes)
    assert calls == [("download", "org/tiny", "config.json", True)]


@pytest.mark.parametrize("exc", [ConnectionError("Network is unreachable"), TimeoutError("read timed out"),
                                 OSError(101, "Network is unreachable")])
def test_network_failure_is_one_line(monkeypatch, exc):
    from llmsizer.readers.hub import spec_from_hub

    def fail(repo_id, filename):
        raise exc

    _fake_hub(monkeypatch, fail)
    with pytest.raises(HubUnavailableError) as e:
        spec_from_hub("org/tiny")
    msg = str(e.value)
    assert "org/tiny" in msg and "not reachable" in msg and "\n" not in msg


def test_hub_errors_map_to_library_errors(monkeypatch):
    errors = pytest.importorskip("huggingface_hub.errors")
    import huggingface_hub

    from llmsizer.readers.hub import spec_from_hub

    def make(cls):
        class Raised(cls):  # the real classes need an HTTP response to construct
            def __init__(self):
                Exception.__init__(self, f"{cls.__name__}: details\nsecond line")
        return Raised()

    for cls, expected in ((errors.RepositoryNotFoundError, UnknownNameError),
                          (errors.GatedRepoError, HubUnavailableError),
                          (errors.RemoteEntryNotFoundError, ModelFileError)):
        def fail(*a, _cls=cls, **k):
            raise make(_cls)
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", fail)
        with pytest.raises(expected) as e:
            spec_from_hub("org/tiny")
        assert isinstance(e.value, LlmsizerError) and "\n" not in str(e.value)


def test_config_and_safetensors_metadata_give_the_same_file_weights_as_the_folder(monkeypatch, tmp_path):
    from llmsizer.readers.hub import spec_from_hub

    write_folder(tmp_path, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)))
    meta = _repo_metadata(tmp_path)
    calls = _fake_hub(monkeypatch, lambda r, f: tmp_path / f, metadata=lambda r: meta)
    spec = spec_from_hub("org/tiny")
    local = spec_from_folder(tmp_path).file_weights
    fw = spec.file_weights
    assert fw is not None and "huggingface.co/org/tiny" in fw.path
    assert (fw.total_bytes, fw.params, fw.by_dtype, fw.layer_bytes, fw.embedding_bytes, fw.output_bytes) == \
        (local.total_bytes, local.params, local.by_dtype, local.layer_bytes, local.embedding_bytes, local.output_bytes)
    assert fw.total_bytes == sum(t.nbytes for t in read_header(tmp_path / "model.safetensors"))
    assert spec.name == "org/tiny" and [c[0] for c in calls] == ["download", "metadata"]


def test_metadata_failure_keeps_the_config_spec(monkeypatch, tmp_path):
    from llmsizer.readers.hub import spec_from_hub

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))

    def not_safetensors(repo_id):
        raise RuntimeError("NotASafetensorsRepoError: no model.safetensors")

    _fake_hub(monkeypatch, lambda r, f: tmp_path / f, metadata=not_safetensors)
    spec = spec_from_hub("org/tiny")
    assert spec.file_weights is None and any("safetensors headers not read" in n for n in spec.notes)


def test_load_model_reaches_the_hub_only_when_asked(monkeypatch, tmp_path):
    from llmsizer.models import load_model

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    calls = _fake_hub(monkeypatch, lambda r, f: tmp_path / f, metadata=lambda r: _repo_metadata(tmp_path))
    with pytest.raises(UnknownNameError):
        load_model("org/not-in-the-catalog")
    assert calls == []
    write_folder(tmp_path, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)))
    spec = load_model("org/not-in-the-catalog", hub=True)
    assert spec.file_weights is not None and spec.source == "https://huggingface.co/org/not-in-the-catalog"
