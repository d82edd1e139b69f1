"""`hardware detect --from DIR` (probe4 finding 4): it printed "read: nvidia-smi --query-gpu=index,name,..." for a
saved file that holds the 212-field query, and did not read a folder laid out as the real fixtures are (one folder
per tool). Now the read line is the command the file holds (its header, or the .cmd.txt beside it), a folder per
tool holding one machine's file is read, and the fixtures' own folder (several machines) is refused naming the
layout. The truth: the fixture files' own header and command line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from cli_capture import run_cli

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
QUERY = REAL / "nvidia-smi-query-gpu"


def _fields(name: str) -> list[str]:
    m = re.search(r"--query-gpu=(\S+)", (QUERY / f"{name}.cmd.txt").read_text("utf-8"))
    assert m is not None
    return m.group(1).split(",")


def test_a_flat_file_reads_as_the_query_its_header_holds(tmp_path: Path) -> None:
    shutil.copyfile(QUERY / "h100-80gb-hbm3-allfields.csv", tmp_path / "nvidia-smi-query-gpu.csv")
    r = run_cli("hardware", "detect", "--from", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    (read,) = json.loads(r.stdout)["read"]
    fields = _fields("h100-80gb-hbm3-allfields")
    assert len(fields) == 212  # the fixture README's count
    assert read["command"].startswith("nvidia-smi --query-gpu=" + ",".join(fields[:3]))
    assert f"({len(fields)} fields)" in read["command"] and "index,name,memory.total" not in read["command"]


def test_a_folder_per_tool_is_read(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi-query-gpu").mkdir()
    (tmp_path / "lscpu").mkdir()
    for f in ("l40s-allfields.csv", "l40s-allfields.cmd.txt"):
        shutil.copyfile(QUERY / f, tmp_path / "nvidia-smi-query-gpu" / f)
    shutil.copyfile(REAL / "lscpu" / "intel-xeon-gold-6326-2s-truncated.txt", tmp_path / "lscpu" / "node.txt")
    r = run_cli("hardware", "detect", "--from", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert re.search(r"detected-l40s\s+gpu\s+1\s+44\.99 GiB\s+l40s", r.stdout)  # 46068 MiB in the CSV
    fields = _fields("l40s-allfields")
    assert f"read: nvidia-smi --query-gpu={','.join(fields[:3])},... ({len(fields)} fields) --format=csv" in r.stdout
    assert "read: lscpu  [" in r.stdout and "64 CPUs" in r.stdout


def test_the_fixtures_folder_of_several_machines_is_refused_naming_the_layout() -> None:
    r = run_cli("hardware", "detect", "--from", str(REAL))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    n = sum(1 for f in (REAL / "nvidia-smi-query-gpu").iterdir() if not f.name.endswith(".cmd.txt"))  # the captures
    assert f"{n} files for nvidia-smi-query-gpu" in r.stderr and "one machine" in r.stderr
