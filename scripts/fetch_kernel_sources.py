"""Fetch the published Python sources of mamba_ssm and causal-conv1d (their PyPI source distributions, pinned by
version and sha256) into .venv/kernel-sources/, for tests/training/test_mamba_kernel_saved_tensors.py, which runs
their autograd Functions on the CPU with the CUDA/Triton launches stood in for. The packages cannot be installed
here (their build needs a CUDA toolchain); nothing is installed or imported by this script, it only unpacks.
Run by ``scripts/setup.sh test``; a failure (no network) is a warning there, and the test then skips."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

DEST = Path(__file__).resolve().parents[1] / ".venv" / "kernel-sources"
# (folder unpacked, url, sha256): the versions the test's docstring names (state-spaces/mamba @ e9594ce,
# Dao-AILab/causal-conv1d @ 0d2252d)
SOURCES = (
    ("mamba_ssm-2.3.2.post1",
     "https://files.pythonhosted.org/packages/af/48/aa7bec0efc7453fa0512276c0069c854bf684219050294266534bfef34bb/"
     "mamba_ssm-2.3.2.post1.tar.gz", "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028"),
    ("causal_conv1d-1.6.1",
     "https://files.pythonhosted.org/packages/63/15/ec51d77a2df03ee93410f8ee97fceeb7181da213813c51243e9dd6d7e144/"
     "causal_conv1d-1.6.1.tar.gz", "e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b"),
)


def fetch(folder: str, url: str, sha256: str) -> None:
    if (DEST / folder).is_dir():
        return
    with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 (a fixed https URL)
        data = r.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SystemExit(f"{url}: sha256 mismatch, not unpacked")
    DEST.mkdir(parents=True, exist_ok=True)
    tmp = DEST / (folder + ".partial")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        try:
            tar.extractall(tmp, filter="data")
        except TypeError:  # Python before 3.10.12 has no extraction filter: plain files and folders inside tmp only
            safe = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not Path(m.name).is_absolute()
                    and ".." not in Path(m.name).parts]
            tar.extractall(tmp, members=safe)  # noqa: S202 (members checked above)
    (tmp / folder).rename(DEST / folder)
    tmp.rmdir()


def main() -> int:
    try:
        for folder, url, sha256 in SOURCES:
            fetch(folder, url, sha256)
    except (OSError, tarfile.TarError, SystemExit) as e:
        print(f"warning: kernel sources not fetched ({e}); test_mamba_kernel_saved_tensors.py will skip",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
