"""A Hugging Face Hub repository -> ModelSpec, without downloading weights (optional ``llmsizer[hub]``).

Only ``config.json`` is downloaded (``huggingface_hub.hf_hub_download``); stored weight bytes come from
the safetensors headers, fetched by ``huggingface_hub.get_safetensors_metadata`` with HTTP range
requests (huggingface_hub ``utils/_safetensors.py``). With ``HF_HUB_OFFLINE`` set, only the local
cache is used and no headers are fetched. ``huggingface_hub`` is imported on first use only.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import HubUnavailableError, InputError, ModelFileError, UnknownNameError
from ..specs import ModelSpec
from .hf_config import load_config_file, spec_from_config
from .hf_folder import attach_file_weights
from .safe_io import MAX_TENSORS
from .safetensors_header import TensorInfo

INSTALL_HINT = "pip install 'llmsizer[hub]'"
_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub utils._is_true


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise HubUnavailableError(f"reading models from the Hugging Face Hub needs huggingface_hub: "
                                  f"{INSTALL_HINT}") from None
    return huggingface_hub


def offline(hf: Any) -> bool:
    """HF_HUB_OFFLINE, read now (huggingface_hub itself reads it once, at import)."""
    env = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE
    return env or bool(getattr(getattr(hf, "constants", None), "HF_HUB_OFFLINE", False))


def _error(hf: Any, name: str) -> type[BaseException]:
    """An exception class of huggingface_hub.errors, or a never-raised placeholder if absent."""
    cls = getattr(getattr(hf, "errors", None), name, None)
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else _Never


class _Never(Exception):
    pass


# One short attempt before huggingface_hub's own client, which retries a refused or unreachable endpoint with
# back-off for ~23 s (measured: connection refused on HF_ENDPOINT=http://127.0.0.1:9, 23.9 s before the error).
REACH_TIMEOUT_S = 3.0


def reachable(hf: Any, timeout: float = REACH_TIMEOUT_S) -> bool:
    """True when a TCP connection to the Hub endpoint (HF_ENDPOINT) opens within ``timeout`` seconds."""
    import socket
    from urllib.parse import urlsplit

    endpoint = str(getattr(getattr(hf, "constants", None), "ENDPOINT", "") or os.environ.get("HF_ENDPOINT", "")
                   or "https://huggingface.co")
    u = urlsplit(endpoint)
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        socket.create_connection((u.hostname or "huggingface.co", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{e.__class__.__name__}: {lines[0][:200] if lines else 'no detail'}"


def _config_path(hf: Any, repo_id: str, revision: str | None, is_offline: bool) -> Path:
    """Local path of the repo's config.json (downloaded, or from the cache when offline)."""
    try:
        return Path(hf.hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=is_offline))
    except _error(hf, "GatedRepoError"):
        raise HubUnavailableError(f"{repo_id}: gated repository; accept its license on huggingface.co and log in "
                                  "(hf auth login or HF_TOKEN)") from None
    except (_error(hf, "RepositoryNotFoundError"), _error(hf, "RevisionNotFoundError")):
        raise UnknownNameError(f"{repo_id}: not in the catalog and not found on the Hugging Face Hub "
                               "(private repositories need a login)") from None
    except _error(hf, "LocalEntryNotFoundError"):
        if is_offline:
            raise HubUnavailableError(f"{repo_id}: HF_HUB_OFFLINE is set and config.json is not in the local "
                                      "Hugging Face cache") from None
        raise HubUnavailableError(f"{repo_id}: the Hugging Face Hub cannot be reached and config.json is not "
                                  "cached") from None
    except _error(hf, "EntryNotFoundError"):
        raise ModelFileError(f"{repo_id}: the repository has no config.json") from None
    except _error(hf, "HFValidationError"):
        raise InputError(f"{repo_id!r} is not a valid Hugging Face repository id") from None
    except Exception as e:  # network errors (httpx/requests/OSError), HTTP 5xx, offline mode...
        raise HubUnavailableError(f"{repo_id}: the Hugging Face Hub is not reachable ({_first_line(e)})") from None


def _tensors(meta: Any) -> list[TensorInfo]:
    """huggingface_hub SafetensorsRepoMetadata -> our records (bytes from data_offsets)."""
    out: list[TensorInfo] = []
    for fname, fmeta in sorted(meta.files_metadata.items()):
        if len(out) + len(fmeta.tensors) > MAX_TENSORS:  # same limit as local folders (docs/security.md)
            raise ModelFileError(f"the safetensors headers list more than {MAX_TENSORS:,} tensors (the limit)")
        for name, t in fmeta.tensors.items():
            begin, end = t.data_offsets
            out.append(TensorInfo(name, str(t.dtype), tuple(int(d) for d in t.shape), int(end) - int(begin), fname))
    return out


def spec_from_hub(repo_id: str, *, revision: str | None = None) -> ModelSpec:
    """ModelSpec of a Hub repository from its config.json, with FileWeights from its safetensors headers.

    Raises HubUnavailableError when huggingface_hub is missing or the Hub cannot be reached.
    """
    hf = _hub()
    is_offline = offline(hf)
    if not is_offline and not reachable(hf):  # one short attempt, then the cache or the one-line error
        try:
            path = Path(hf.hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=True))
        except Exception:
            raise HubUnavailableError(f"{repo_id}: the Hugging Face Hub cannot be reached (no connection within "
                                      f"{REACH_TIMEOUT_S:g} s) and config.json is not in the local cache") from None
        cfg = load_config_file(path)
        spec = spec_from_config(cfg, name=repo_id, source=f"https://huggingface.co/{repo_id}")
        return replace(spec, notes=spec.notes + ("the Hub could not be reached: config.json from the local cache, "
                                                 "weights estimated from it",))
    cfg = load_config_file(_config_path(hf, repo_id, revision, is_offline))
    url = f"https://huggingface.co/{repo_id}" + (f"/tree/{revision}" if revision else "")
    spec = spec_from_config(cfg, name=repo_id, source=url)
    if is_offline:
        return replace(spec, notes=spec.notes + ("HF_HUB_OFFLINE is set: safetensors headers not fetched; "
                                                 "weights estimated from config.json",))
    getter = getattr(hf, "get_safetensors_metadata", None)
    if getter is None:
        return replace(spec, notes=spec.notes + ("this huggingface_hub has no get_safetensors_metadata: weights "
                                                 "estimated from config.json",))
    try:
        tensors = _tensors(getter(repo_id, revision=revision))
    except Exception as e:  # not a safetensors repo, header parse error, network...
        return replace(spec, notes=spec.notes + (f"safetensors headers not read ({_first_line(e)}): weights "
                                                 "estimated from config.json",))
    if not tensors:
        return spec
    return attach_file_weights(spec, tensors, f"{url} (safetensors headers)")
