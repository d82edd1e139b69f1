"""Launch a step script as N real torch.distributed ranks (gloo on 127.0.0.1) and return rank 0's JSON result: the
launcher the DeepSpeed ZeRO-3 and FSDP2 memory tests share."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(script: Path, case: dict[str, Any], ranks: int, *, local_rank_zero: bool = False) -> dict[str, Any]:
    """Run ``script case_json`` once per rank; the last stdout line of rank 0 is its JSON result. ``local_rank_zero``:
    every rank says LOCAL_RANK=0 (DeepSpeed on CPU), else LOCAL_RANK=rank."""
    port = str(_free_port())
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK="0" if local_rank_zero else str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(script.parent), *sys.path]))
        procs.append(subprocess.Popen([sys.executable, str(script), json.dumps(case)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        if p.returncode:
            raise RuntimeError(err[-4000:])
    result: dict[str, Any] = json.loads(outs[0][0].strip().splitlines()[-1])
    return result
