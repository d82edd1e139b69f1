"""One error hierarchy for llmsizer.

Every error subclasses both :class:`LlmsizerError` and the built-in exception a Python user would
expect, so ``except ValueError`` keeps working. The CLI turns any ``LlmsizerError`` into one line on
stderr and exit code 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class LlmsizerError(Exception):
    """Base class of every error llmsizer raises on purpose."""


class InputError(LlmsizerError, ValueError):
    """A value given by the user is invalid (negative context, unknown format, bad unit...)."""


class FieldError(InputError):
    """An input error about one workload field (``field``: its name, e.g. 'target_len'), found only once the model
    is known: a request file's plan points at that field's line, not the job's (plan/compose.py ``_about``)."""

    def __init__(self, field: str, message: str, also: tuple[str, ...] = (), spelled: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.fields = (field, *also)  # every field the message names (``also``: the others refused with it)
        self.spelled = spelled  # the message already writes the field for every surface (flag, keyword, key): kept

    def renamed(self, name_of: Callable[[str], str]) -> str:
        """The message with each of its fields written as ``name_of(field)``: the flag on the CLI and in the web's
        detail (``--tp``), the key of a request file; ``str(self)`` keeps the Python name (``tensor_parallel``)."""
        out = str(self)
        if self.spelled:  # "give the image size, WxH (--image-size on the command line, image_size in the web API, ...)"
            return out
        for f in self.fields:
            out = re.sub(rf"(?<![\w-]){re.escape(f)}(?![\w-])", lambda _, f=f: name_of(f), out)  # type: ignore[misc]
        return out


class DeviceCannotRunError(FieldError):
    """A setting the chosen device cannot run (a kernel its compute capability lacks): bad input for that device, so
    exit 2 when the device is given, and a rejected option, with this message, where a search tries many
    (recommend)."""


class NotModelledError(FieldError):
    """A setting the chosen device runs, but through a stack llmsizer does not model (FP8 training on an Intel Gaudi,
    Intel's own TransformerEngine): exit 2 where the device is given, like ``DeviceCannotRunError``, and in a search
    (recommend) a rejected option whose reason says "not modelled", not that the device cannot run it."""


class MissingUnitError(InputError):
    """A size written as a bare number too small to be meant as bytes ('--memory 24'): a forgotten unit."""


class SizeInBitsError(MissingUnitError):
    """A size written in bits ('--memory 80Gb' is 10 GB): read by the rule, a mistyped byte unit in practice."""


class UnknownNameError(LlmsizerError, KeyError):
    """A name looked up in a catalog (model, format, engine) does not exist."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable
        return str(self.args[0]) if self.args else ""


class ModelFileError(LlmsizerError, ValueError):
    """A model file (config.json, safetensors, GGUF) is missing, malformed or unsupported."""


class UnsupportedArchitectureError(LlmsizerError, ValueError):
    """A config describes an architecture whose structure llmsizer cannot count."""


class HubUnavailableError(LlmsizerError, RuntimeError):
    """The Hugging Face Hub (optional source) is not reachable or not installed."""
