"""probe22 D3, C6, C9: the provider's side.

D3: `capacity export ID --format slurm` without --user printed a ``scontrol create reservation`` with neither Users=
nor Accounts=, which scontrol refuses ("Either Users/Groups, AllowedPartitions, QOS and/or Accounts must be specified.
No reservation created.": SchedMD/slurm src/common/slurm_protocol_defs.c:6919-6927 @284c3b95, validate_resv_create_desc,
called by src/scontrol/create_res.c:422). It is now refused (exit 2, one line naming --user and --account; the web
400 with the same line), and --account writes Accounts=.
C6: `capacity import --pools ''` wrote an inventory in which no job can run; it is refused, nothing written.
C9: the `request new` template named pool 'gpu-cluster-a', which the shipped example inventory lacks, so a first
`capacity check` of the template against it answered DOES NOT FIT [pool]."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from cli_capture import run

from .test_slurm_export_utc import booked

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_INVENTORY = ROOT / "examples" / "provider" / "inventory.yaml"
A40 = ROOT / "tests" / "fixtures" / "real_outputs" / "scontrol-show-node" / "a40-1gpu-slinky-k8s.txt"


_booked = booked  # the booking the UTC export test makes


def _scontrol_words(text: str) -> dict[str, str]:
    line = next(x for x in text.splitlines() if "scontrol create reservation" in x)
    return dict(w.split("=", 1) for w in shlex.split(line)[4:] if "=" in w)


def test_slurm_export_needs_users_or_accounts(tmp_path: Path) -> None:
    inv, db, rid = _booked(tmp_path)
    code, out, err = run("capacity", "export", rid, "--format", "slurm", "--db", db)
    lines = err.strip().splitlines()
    assert code == 2 and not out and len(lines) == 1, (code, out, err)
    assert "--user (Users=)" in lines[0] and "--account (Accounts=)" in lines[0], lines
    code, out, _ = run("capacity", "export", rid, "--format", "slurm", "--db", db, "--account", "ml-team")
    words = _scontrol_words(out)
    assert code == 0 and words["Accounts"] == "ml-team" and "Users" not in words, words
    code, out, _ = run("capacity", "export", rid, "--format", "slurm", "--db", db, "--user", "alice")
    words = _scontrol_words(out)
    assert code == 0 and words["Users"] == "alice" and "Accounts" not in words, words
    # Kueue and Blazar name no principal: unchanged
    assert run("capacity", "export", rid, "--format", "kueue", "--db", db, "--inventory", str(inv))[0] == 0

    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    with TestClient(create_app(provider=ProviderConfig(inventory=str(inv), db=db))) as c:
        bare = c.get(f"/api/v1/capacity/export/{rid}", params={"format": "slurm"})
        account = c.get(f"/api/v1/capacity/export/{rid}", params={"format": "slurm", "account": "ml-team"})
    assert bare.status_code == 400 and bare.json()["detail"] == lines[0].removeprefix("llmsizer: error: ")
    cli = run("capacity", "export", rid, "--format", "slurm", "--db", db, "--account", "ml-team")[1]
    assert account.status_code == 200 and account.text == cli


def test_import_with_no_pool_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    out = tmp_path / "inv.yaml"
    for pools in ("", " , "):
        code, _, err = run("capacity", "import", "--scontrol", str(A40), "--site", "s", "--pools", pools, "-o",
                           str(out))
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "names no pool" in lines[0], err
        assert not out.exists()
    assert run("capacity", "import", "--scontrol", str(A40), "--site", "s", "--pools", "serving", "-o",
               str(out))[0] == 0


def test_the_request_template_names_pools_of_the_example_inventory(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    req = tmp_path / "t.yaml"
    assert run("request", "new", "-o", str(req))[0] == 0
    named = {job["resources"]["pool"] for job in yaml.safe_load(req.read_text())["jobs"]
             if job.get("resources", {}).get("pool")}
    pools = {p for node in yaml.safe_load(EXAMPLE_INVENTORY.read_text())["nodes"] for p in node.get("pools", [])}
    assert named and named <= pools, (named, pools)
    code, out, err = run("capacity", "check", str(req), "--inventory", str(EXAMPLE_INVENTORY), "--db",
                         str(tmp_path / "none.db"))
    assert "[pool]" not in out, out


@pytest.mark.parametrize("flag", ["--account", "--user"])
@pytest.mark.parametrize("fmt", ["kueue", "blazar"])
def test_an_account_on_a_format_without_one_is_refused(tmp_path: Path, fmt: str, flag: str) -> None:
    """review31 N5: a Kueue or Blazar export has no Accounts= field: --account there is refused in one line (exit 2),
    not silently dropped; the web answers 400 with the same line. fixes23: the same for --user (Users=): Kueue admits
    by namespace (its docs' cluster_queue.md "Namespace selector"), a Blazar lease is its token's project's
    (python-blazarclient's `lease create` has no user option); before, --user was accepted there and unused."""
    inv, db, rid = _booked(tmp_path)
    code, out, err = run("capacity", "export", rid, "--format", fmt, "--db", db, flag, "ml-team")
    lines = err.strip().splitlines()
    assert code == 2 and not out and len(lines) == 1, (code, out, err)
    assert flag in lines[0] and f"a {fmt} export has no such field" in lines[0], lines

    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    with TestClient(create_app(provider=ProviderConfig(inventory=str(inv), db=db))) as c:
        web = c.get(f"/api/v1/capacity/export/{rid}", params={"format": fmt, flag.removeprefix("--"): "ml-team"})
    assert web.status_code == 400 and web.json()["detail"] == lines[0].removeprefix("llmsizer: error: ")
