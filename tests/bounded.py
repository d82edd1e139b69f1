"""Run one reader call in a child process under a memory cap (RLIMIT_AS) and a wall-clock timeout.

The child prints ``OK`` for a result or ``ERROR <class>: <message>`` for an LlmsizerError; anything else
(a traceback, MemoryError, a hang, a crash) shows up as a non-zero exit code or a TimeoutExpired, so the
caller can assert that hostile input ends in a result or one clean line, in bounded time and memory.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
MEMORY_CAP = 1 << 30  # 1 GiB of address space for the whole child (interpreter included)
TIME_CAP_S = 10.0

_CHILD = textwrap.dedent("""
    import resource, sys
    cap = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    sys.path.insert(0, sys.argv[2])
    from llmsizer.errors import LlmsizerError
    from llmsizer.models import load_model
    from llmsizer.readers.gguf_header import read_gguf_header
    from llmsizer.readers.hf_config import load_config_file, spec_from_config
    from llmsizer.readers.safetensors_header import read_header
    path = sys.argv[3]
    try:
        {call}
    except LlmsizerError as e:
        msg = str(e)
        assert "\\n" not in msg, msg
        print("ERROR " + type(e).__name__ + ": " + msg)
        raise SystemExit(0)
    print("OK")
""")


def run_bounded(call: str, path: str | Path, *, memory: int = MEMORY_CAP, timeout: float = TIME_CAP_S) -> str:
    """stdout of ``call`` (a statement using ``path``) run in a capped child; asserts a clean exit."""
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(call=call), str(memory), SRC, str(path)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout.strip()
