"""A service whose one copy of the model spans machines (tensor parallel across them) runs all-reduces between its
nodes every layer, so `capacity check` places it only on nodes of one fabric, the rule a multi-node training run has
(placement.py ``JobNeed.one_fabric``); a service whose copies each fit one machine does not need one. The booking
records how many machines a copy spans (store schema 6), so `capacity re-place` keeps the rule; a booking stored
before schema 6 reads as 1.

Independent truth: 405e9 parameters (Meta, "The Llama 3 Herd of Models", Table 3) x 2 B (bf16) / 8 = 101 GB is over
an H100's 80 GB (NVIDIA H100 SXM5 datasheet), so one copy needs more than one 8-GPU machine; 70.6e9 parameters
(Llama 3.1 70B) x 2 B / 8 = 17.6 GB per device fits one machine of 8, so two TP-8 copies are one per machine. On
real SQLite files and a real PostgreSQL server (the suite's, tests/provider/conftest.py)."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from pathlib import Path

import pytest

from cli_capture import run_json
from llmsizer.provider.placement import JobNeed
from llmsizer.provider.replace import stored_need

H100_BYTES = 80e9  # NVIDIA H100 SXM5 datasheet: 80 GB HBM3
PARAMS_405B = 405e9  # Llama 3 paper, Table 3
PARAMS_70B = 70.6e9  # Llama 3.1 70B model card: 70.6B parameters
NOW = ("--now", "2027-01-01T00:00")


def _inventory(fabric_a: str, fabric_b: str) -> str:
    fabrics = ", ".join(f"{{id: {f}, bandwidth: 3200 Gb/s}}" for f in dict.fromkeys((fabric_a, fabric_b)))
    return ("version: 1\nsites:\n  - id: s1\n    fabrics: [" + fabrics + "]\nnodes:\n" + "".join(
        f"  - {{id: h100-{k}, site: s1, device: h100-sxm, devices: 8, cpus: 192, ram: 2 TiB, pools: [serving], "
        f"fabric: {f}}}\n" for k, f in ((1, fabric_a), (2, fabric_b))) +
        "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")


SHARED = _inventory("ib", "ib")  # two 8-GPU nodes on one fabric
APART = _inventory("ib-a", "ib-b")  # two 8-GPU nodes, each on a fabric of its own


def _service(model: str, resources: str, extra: str = "") -> str:
    return ("version: 1\ntitle: t\njobs:\n- name: j\n  kind: inference\n  model: {name: " + model + "}\n"
            f"  engine: vllm\n  quantization: bf16\n{extra}  resources: {resources}\n"
            "  traffic:\n    concurrency: {peak: 16, typical: 16}\n    context: {peak: 8k, typical: 8k}\n"
            "  service: {duration: 3 days}\n")


SPANS = _service("llama-3.1-405b", "{instance: aws-p5.48xlarge, count: 16}")  # 2 x p5.48xlarge: TP 16
REPLICAS = _service("llama-3.1-70b", "{device: h100-sxm, count: 16}", "  tensor_parallel: 8\n")  # 2 copies of TP 8


def test_hand_derivation() -> None:
    assert PARAMS_405B * 2 / 8 > H100_BYTES  # a 405B bf16 copy does not fit 8 H100s: it spans machines
    assert PARAMS_70B * 2 / 8 < H100_BYTES  # a 70B bf16 copy fits 8 H100s, one machine


def _check(tmp_path: Path, request: str, inventory: str) -> dict:
    (tmp_path / "inv.yaml").write_text(inventory)
    (tmp_path / "r.yaml").write_text(request)
    _, d = run_json("capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                    "--no-db", *NOW)
    d = d["jobs"]
    return d[0]


def test_405b_service_is_placed_on_nodes_sharing_a_fabric(tmp_path: Path) -> None:
    c = _check(tmp_path, SPANS, SHARED)
    assert (c["need"]["nodes"], c["need"]["copy_nodes"]) == (2, 2)
    assert c["fits"] is True, c
    assert sorted(c["placement"]["nodes"]) == ["h100-1", "h100-2"]


def test_405b_service_is_refused_on_nodes_of_two_fabrics(tmp_path: Path) -> None:
    c = _check(tmp_path, SPANS, APART)
    assert c["fits"] is False and c["binding"] == "fabric", c
    assert "at most 1 on one fabric; a 2-node service whose one copy of the model spans 2 machines" in c["reason"]
    assert "must stay inside one fabric" in c["reason"]


def test_tp8_service_with_two_replicas_needs_no_shared_fabric(tmp_path: Path) -> None:
    c = _check(tmp_path, REPLICAS, APART)
    assert (c["need"]["nodes"], c["need"]["copy_nodes"]) == (2, 1)
    assert c["fits"] is True, c
    assert sorted(c["placement"]["nodes"]) == ["h100-1", "h100-2"]


def test_one_fabric_is_trainings_rule_and_a_spanning_services() -> None:
    base = JobNeed("j", "inference", "h100-sxm", 16, 2)
    assert not base.one_fabric  # copies each in one machine (and a hand-made need: not known, 1)
    assert dataclasses.replace(base, copy_nodes=2).one_fabric
    assert dataclasses.replace(base, kind="training").one_fabric
    assert not dataclasses.replace(base, devices=8, nodes=1, copy_nodes=1, kind="training").one_fabric


def _db(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return str(tmp_path / "b.db")
    from .pg_databases import fresh_database
    return fresh_database(request.getfixturevalue("pg_url"), "llmsizer_spanfab")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_booking_records_the_span_and_old_rows_read_as_one(kind: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")
    from llmsizer.provider.store import Store
    db = _db(kind, tmp_path, request)
    (tmp_path / "inv.yaml").write_text(SHARED)
    (tmp_path / "r.yaml").write_text(SPANS)
    code, out = run_json("capacity", "book", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                         "--db", db, *NOW)
    out = out["reservations"]
    assert code == 0, out
    st = Store(db)
    try:
        (b,) = st.bookings()
        assert b.copy_nodes == 2
        need = stored_need(b, "gpu")
        assert need.copy_nodes == 2 and need.one_fabric  # re-placed on one fabric, as checked
        # a row stored before schema 6 (no span recorded): read as 1, each copy in one machine (the old rule)
        with st.engine.begin() as c:
            c.exec_driver_sql("UPDATE reservations SET copy_nodes = NULL")
        (old,) = st.bookings()
        assert old.copy_nodes is None and stored_need(old, "gpu").copy_nodes == 1
    finally:
        st.close()
    if kind == "sqlite":  # a schema-5 file (no column at all) opened read-only is read as it is
        con = sqlite3.connect(db)
        con.execute("ALTER TABLE reservations DROP COLUMN copy_nodes")
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        con.commit()
        con.close()
        code, shown = run_json("capacity", "show", "--inventory", str(tmp_path / "inv.yaml"), "--db", db)
        assert code == 0 and len(shown["reservations"]) == 1
        st = Store(db)  # opened for writing: migrated to schema 6, the column NULL
        try:
            (old,) = st.bookings()
            assert old.copy_nodes is None
        finally:
            st.close()
        con = sqlite3.connect(db)
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("6",)
        con.close()


def test_worst_copy_machines_counts_straddling_copies() -> None:
    from llmsizer.estimate.fit import worst_copy_machines
    # by hand, copies laid out in rank order: devices 0-3, 4-7, 8-11 on machines of 8 (0-7, 8-15): each in one
    assert worst_copy_machines(4, 8, 3) == 1
    # on machines of 6 (0-5, 6-11): the second copy, devices 4-7, takes 2 + 2 of two machines
    assert worst_copy_machines(4, 6, 3) == 2
    assert worst_copy_machines(16, 8, 1) == 2 and worst_copy_machines(8, 8, 2) == 1
    assert worst_copy_machines(3, 8, 5) == 2  # devices 6-8 cross the first machine's end


TWELVE = _service("llama-3.1-70b", "{device: h100-sxm, count: 12}")  # the plan: 8 + 4, TP 4 x 3 (fit --count 12)


def test_twelve_bare_gpus_booked_six_and_six_need_one_fabric(tmp_path: Path) -> None:
    """The plan lays 12 bare H100s out as fit does, machines of 8 + 4 with three TP-4 copies (each inside a machine);
    the provider books ceil(12 / 2) = 6 per node, where the second copy takes 2 + 2 GPUs of two machines: its
    all-reduces cross them, so the two nodes must share a fabric (review17 D1: copy_nodes was the plan's 1)."""
    code, plan = run_json("fit", "llama-3.1-70b", "--engine", "vllm", "--weights", "bf16", "--device", "h100-sxm",
                          "--count", "12", "--context", "8k", "--concurrency", "16")
    assert code == 0 and plan["tensor_parallel"] == 4, plan  # three copies of 4: 12 = 8 + 4 leaves each in a machine
    c = _check(tmp_path, TWELVE, APART)
    assert (c["need"]["nodes"], c["need"]["copy_nodes"]) == (2, 2), c["need"]
    assert c["fits"] is False and c["binding"] == "fabric", c
    assert _check(tmp_path, TWELVE, SHARED)["fits"] is True


def test_show_and_export_say_how_many_machines_a_copy_spans(tmp_path: Path) -> None:
    """review17 D4: the span the booking records (schema 6) is shown by `capacity show` (text, --json) and said by
    `capacity export`; a service whose copies each fit one machine shows 1 and no span words. The span is the hand
    derivation's (405B bf16 over 8 H100s: 2 machines; 70B: 1), not read back from the placement."""
    pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")
    from cli_capture import run
    db = str(tmp_path / "b.db")
    (tmp_path / "inv.yaml").write_text(SHARED)
    ids = {}
    for name, req in (("spans", SPANS), ("replicas", REPLICAS)):
        (tmp_path / f"{name}.yaml").write_text(req)
        code, out = run_json("capacity", "book", str(tmp_path / f"{name}.yaml"), "--inventory",
                             str(tmp_path / "inv.yaml"), "--db", db, *NOW)
        out = out["reservations"]
        assert code == 0, out
        (rec,) = out if isinstance(out, list) else out["bookings"]
        ids[name] = rec["id"]
        if name == "spans":  # booked confirmed; the replicas would not fit beside it: released before booking them
            code, shown = run_json("capacity", "show", "--inventory", str(tmp_path / "inv.yaml"), "--db", db)
            (r,) = shown["reservations"]
            assert r["copy_nodes"] == math.ceil(PARAMS_405B * 2 / 8 / H100_BYTES) == 2
            code, text, _ = run("capacity", "show", "--inventory", str(tmp_path / "inv.yaml"), "--db", db)
            (line,) = [x for x in text.splitlines() if rec["id"] in x]
            assert "one copy spans 2 machines" in line, line
            for fmt in ("slurm", "kueue", "blazar"):
                who = ["--user", "svc"] if fmt == "slurm" else []  # kueue/blazar have no user field: refused there
                if fmt == "kueue":  # the ClusterQueue covers the booked nodes' cpu and memory: the inventory's
                    who = ["--inventory", str(tmp_path / "inv.yaml")]
                code, exported, err = run("capacity", "export", rec["id"], "--format", fmt, "--db", db, *who)
                assert code == 0, err
                assert exported.startswith("# one copy of the model spans 2 machines"), exported
            assert run("capacity", "release", rec["id"], "--db", db)[0] == 0
    code, shown = run_json("capacity", "show", "--inventory", str(tmp_path / "inv.yaml"), "--db", db)
    r = next(x for x in shown["reservations"] if x["id"] == ids["replicas"])
    assert r["copy_nodes"] == math.ceil(PARAMS_70B * 2 / 8 / H100_BYTES) == 1
    assert "spans" not in r["figures_text"]
