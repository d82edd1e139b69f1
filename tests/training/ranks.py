"""Launch a step script as N real torch.distributed ranks (gloo on 127.0.0.1) and return rank 0's JSON result: the
launcher the DeepSpeed ZeRO-3, FSDP1, FSDP2 and context-parallel memory tests share (``run_ranks``; ``run_step`` by
script name), with the tiny Llama most of them build (``TINY_LLAMA``); and, inside a rank, the set-up and ending the
FSDP step scripts share (``rank_model``, ``end_rank``, ``rank_main``, ``count_collectives``). Nothing here imports
llmsizer, and torch and transformers only inside a rank."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# The small random-weight Llama the FSDP1/FSDP2, DeepSpeed, pipeline, CPU-offload and autocast rank tests build: 4
# layers, GQA (4 query / 2 KV heads), an untied lm_head; small enough for two CPU ranks, every unit distinct.
TINY_LLAMA: dict[str, Any] = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 256, "intermediate_size": 512,
                              "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                              "max_position_embeddings": 1024, "tie_word_embeddings": False}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# rank 0's result of every case run in this session, by (script, ranks, local_rank_zero, case JSON): a step is
# deterministic (seed 0, one thread), so a case two tests (or two modules) ask for runs once
_RESULTS: dict[tuple[str, int, bool, str], str] = {}


def _key(script: Path, case: dict[str, Any], ranks: int, local_rank_zero: bool) -> tuple[str, int, bool, str]:
    return str(script.resolve()), ranks, local_rank_zero, json.dumps(case, sort_keys=True)


def run_ranks(script: Path, case: dict[str, Any], ranks: int, *, local_rank_zero: bool = False) -> dict[str, Any]:
    """Run ``script case_json`` once per rank; the last stdout line of rank 0 is its JSON result. ``local_rank_zero``:
    every rank says LOCAL_RANK=0 (DeepSpeed on CPU), else LOCAL_RANK=rank. A rank that fails raises with its rank,
    exit status and the end of its stderr; the other ranks are then stopped rather than left waiting for it. A case
    this session has run already (``run_cases`` included) is not run again: its result is returned (a copy)."""
    key = _key(script, case, ranks, local_rank_zero)
    if key in _RESULTS:
        cached: dict[str, Any] = json.loads(_RESULTS[key])
        return cached
    port = str(_free_port())
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK="0" if local_rank_zero else str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(script.parent), *sys.path]))
        procs.append(subprocess.Popen([sys.executable, str(script), json.dumps(case)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for rank, (p, (_, err)) in enumerate(zip(procs, outs, strict=True)):
        if p.returncode:
            raise RuntimeError(f"{script.name} rank {rank} of {ranks} exited with {p.returncode}:\n{err[-4000:]}")
    line = outs[0][0].strip().splitlines()[-1]
    _RESULTS[key] = line
    result: dict[str, Any] = json.loads(line)
    return result


def run_cases(script: Path | str, cases: list[dict[str, Any]], ranks: int = 2, *, local_rank_zero: bool = False,
              preload: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``run_ranks`` of every case of ``cases`` in one launch: rank 0's result of each, in order (cases this session has run already are not run again) (``script``: a path,
    or a step script's name beside this module). Each rank's process imports torch, transformers and the modeling
    module of every case's ``config`` model type (torch alone when no case has a ``config``), the ``preload``
    modules and the script once (``_zygote``), then forks one child per case that joins a fresh gloo group on its own port and runs the script's ``main(case)`` exactly as a
    launch of its own would: the child starts from the parent's state after the imports alone (no model built, no
    group joined, no torch RNG drawn, one OpenMP thread), and whatever it patches or allocates dies with it. What it
    saves is the per-launch interpreter start and imports (tens of seconds of CPU for two ranks on a shared 2-core
    CI machine). A case that fails fails the launch, naming the case."""
    path = Path(script) if isinstance(script, Path) else HERE / script
    keys = [_key(path, c, ranks, local_rank_zero) for c in cases]
    todo = [c for c, k in zip(cases, keys, strict=True) if k not in _RESULTS]
    if todo:
        for k, line in zip([_key(path, c, ranks, local_rank_zero) for c in todo],
                           _launch_cases(path, todo, ranks, local_rank_zero, preload), strict=True):
            _RESULTS[k] = line
    return [json.loads(_RESULTS[k]) for k in keys]


def _quiet_ports(n: int) -> list[int]:
    """``n`` distinct free ports for cases that bind them minutes later: below the kernel's ephemeral range
    (/proc/sys/net/ipv4/ip_local_port_range), where no port-0 bind or outgoing connection (gloo's pair listeners, the
    earlier cases' TCPStore clients) can land in between (review22 D6); port 0's picks where the range is unknown."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    held: list[socket.socket] = []
    try:
        pool = random.sample(range(10_000, low), min(low - 10_000, 50 * n)) if low > 10_000 + n else []
        for port in pool:
            if len(held) == n:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
        while len(held) < n:  # (no range read, or too few free below it)
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _launch_cases(path: Path, cases: list[dict[str, Any]], ranks: int, local_rank_zero: bool,
                  preload: tuple[str, ...]) -> list[str]:
    """``run_cases``' one launch: rank 0's result line of each case, in order."""
    ports = _quiet_ports(len(cases))
    models = sorted({c["config"]["model_type"] for c in cases if isinstance(c.get("config"), dict)
                     and "model_type" in c["config"]})
    # transformers (5 s of import per rank, more under load) only for steps that build a model from a ``config``;
    # a torch-only step (or one importing transformers itself) pays for what it imports
    spec = {"script": str(path), "cases": cases, "ports": ports, "preload": [*preload],
            "models": models, "transformers": any(isinstance(c.get("config"), dict) for c in cases)}
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK="0" if local_rank_zero else str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]), OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(path.parent), str(HERE), *sys.path]))
        # each rank in its own process group, so a kill reaches the case it forked too (the case holds the pipes:
        # killing the rank alone left communicate() waiting on an orphaned, possibly hung case; review22 D1)
        procs.append(subprocess.Popen([sys.executable, str(HERE / "ranks.py"), json.dumps(spec)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      start_new_session=True))
    deadline = time.monotonic() + 600 * len(cases)
    done: dict[int, tuple[str, str]] = {}
    try:  # until every rank is done, one has failed (the others would wait in a collective) or the deadline
        while len(done) < ranks and time.monotonic() < deadline and not any(p.returncode for p in procs):
            for rank, p in enumerate(procs):
                if rank not in done:
                    try:
                        done[rank] = p.communicate(timeout=1)
                    except subprocess.TimeoutExpired:
                        pass
    finally:
        for rank, p in enumerate(procs):
            if rank not in done:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)  # the rank and the case it forked
                done[rank] = p.communicate()
    outs = [done[rank] for rank in range(ranks)]
    failed = [f"{path.name} rank {rank} of {ranks} exited with {p.returncode}:\n{err[-3000:]}"
              for rank, (p, (_, err)) in enumerate(zip(procs, outs, strict=True)) if p.returncode]
    if failed:  # every failed rank's end: the one that failed by itself and the ones its failure stopped
        raise RuntimeError("\n".join(failed))
    results: dict[int, str] = {}
    for line in outs[0][0].splitlines():
        if line.startswith(_CASE_MARK):
            i, _, body = line[len(_CASE_MARK):].partition(" ")
            results[int(i)] = body
    missing = [i for i in range(len(cases)) if i not in results]
    if missing:
        raise RuntimeError(f"{path.name}: rank 0 returned no result for cases {missing}:\n{outs[0][1][-4000:]}")
    return [results[i] for i in range(len(cases))]


_CASE_MARK = "LLMSIZER_CASE "


def _zygote(spec: dict[str, Any]) -> None:
    """The rank process of ``run_cases``: import once, then fork a child per case (see there). A child prints its
    result as one ``LLMSIZER_CASE <index> <json>`` line and leaves as ``leave_ranks`` does; a child that fails ends
    this rank with its exit status (its traceback is on stderr), and the other ranks' children, waiting for it in a
    collective, end by the launcher's timeout as a failed ``run_ranks`` launch's would."""
    import importlib
    import importlib.util
    import traceback

    import torch  # noqa: F401  (imported here once, before the forks)

    if spec["transformers"]:
        importlib.import_module("transformers")
    for model_type in spec["models"]:  # where transformers' module is named after the type; else it loads in the case
        try:
            importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
        except ModuleNotFoundError:
            pass
    for name in spec["preload"]:
        importlib.import_module(name)
    path = Path(spec["script"])
    loader = importlib.util.spec_from_file_location(path.stem, path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    sys.modules[path.stem] = module
    loader.loader.exec_module(module)
    for i, (case, port) in enumerate(zip(spec["cases"], spec["ports"], strict=True)):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.environ["MASTER_PORT"] = str(port)
                signal.alarm(600)  # a hung case dies by SIGALRM in 600 s, its rank then names it (review22 D1)
                result = module.main(case)
                signal.alarm(0)
                if result is not None:
                    print(_CASE_MARK + f"{i} " + json.dumps(result))
            except BaseException:
                traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
            leave_ranks()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code:
            print(f"case {i} ({json.dumps(case)[:300]}) exited with {code}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(code if code > 0 else 1)
    sys.stdout.flush()
    os._exit(0)


def run_step(script: str, case: dict[str, Any], ranks: int = 2, *, local_rank_zero: bool = False) -> dict[str, Any]:
    """``run_ranks`` on the step script of that name beside this module (two gloo ranks unless told)."""
    return run_ranks(HERE / script, case, ranks, local_rank_zero=local_rank_zero)


def rank_model(case: dict[str, Any], dtype: Any = None) -> tuple[Any, Any]:
    """In a rank launched by ``run_ranks``: join the gloo group, seed 0, one thread, and build ``case["config"]``'s
    small random-weight transformers causal LM with SDPA attention (``dtype``: a torch dtype, None: transformers'
    default). Returns (config, model)."""
    import torch
    import torch.distributed as dist
    import transformers

    transformers.logging.set_verbosity_error()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    conf = transformers.AutoConfig.for_model(**case["config"])
    conf._attn_implementation = "sdpa"
    kwargs = {} if dtype is None else {"dtype": dtype}
    return conf, transformers.AutoModelForCausalLM.from_config(conf, **kwargs)


def end_rank(out: dict[str, Any]) -> dict[str, Any] | None:
    """Rank 0's result, None on the other ranks. The group stays up: ``rank_main`` leaves it (``leave_ranks``)."""
    import torch.distributed as dist

    return out if dist.get_rank() == 0 else None


def count_collectives(phase: Callable[[], str], groups: bool = False) -> list[list[Any]]:
    """In a rank: wrap ``torch.distributed``'s all-gathers and reduce-scatters so that each call appends [phase(), op,
    payload bytes] to the list returned (``groups``: and the global ranks of the call's process group, the default
    group's when none is given); the payload is every rank's elements: the all-gather's output, the
    reduce-scatter's input. Wrapped: ``all_gather_single`` / ``reduce_scatter_single``, which FSDP2's
    ``_fsdp_collectives.py`` and FSDP1's ``_flat_param.py`` / ``_runtime_utils.py`` call through the module, their
    deprecated names ``all_gather_into_tensor`` / ``reduce_scatter_tensor``, and ``all_gather`` into a list, which
    FSDP1 calls for a CPU flat parameter (torch 2.13 ``_flat_param.py`` lines 1466-1474, "HACK this should be
    handled by C10D"). A call made inside another wrapped one is not counted again."""
    import torch.distributed as dist

    sent: list[list[Any]] = []
    depth = [0]

    def nbytes(t: Any) -> int:
        return int(t.numel() * t.element_size())

    def wrap(name: str, op: str, payload: Callable[[tuple[Any, ...], dict[str, Any]], int]) -> None:
        fn = getattr(dist, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            if not depth[0]:
                sent.append([phase(), op, payload(args, kwargs)]
                            + ([dist.get_process_group_ranks(kwargs.get("group") or dist.group.WORLD)] if groups
                               else []))
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
        setattr(dist, name, counted)

    def arg(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, keyword: str) -> Any:
        return args[position] if len(args) > position else kwargs[keyword]

    for name in ("all_gather_single", "all_gather_into_tensor"):
        wrap(name, "all_gather", lambda a, k: nbytes(arg(a, k, 0, "output_tensor")))
    wrap("all_gather", "all_gather", lambda a, k: sum(map(nbytes, arg(a, k, 0, "tensor_list"))))
    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        wrap(name, "reduce_scatter", lambda a, k: nbytes(arg(a, k, 1, "input")))
    return sent


def leave_ranks(deadline_s: float = 120.0) -> None:
    """End a rank's process without tearing the gloo group down: every rank waits at a barrier (no collective is in
    flight anywhere after it), adds itself to a counter in the group's store, and leaves with ``os._exit(0)``; rank
    0, whose process serves that store, leaves last, once every rank has counted itself (or after ``deadline_s``:
    a rank that died reports its own failure). ``destroy_process_group`` and the interpreter's exit run gloo's and the
    store's C++ destructors, which once aborted a rank whose result was complete ("terminate called without an
    active exception": CI of stop 29, test_ring_attention_buffers[cp2]; the session before, cp2-held); nothing of the
    measurement happens there, so the step scripts skip them. Does nothing but exit where no group was joined."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        store = dist.distributed_c10d._get_default_store()
        store.add("llmsizer_ranks_left", 1)
        if dist.get_rank() == 0:
            end = time.monotonic() + deadline_s
            while store.add("llmsizer_ranks_left", 0) < dist.get_world_size() and time.monotonic() < end:
                time.sleep(0.01)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def rank_main(main: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
    """A step script's entry point: ``main(case)`` on the JSON case in argv[1]; print its result (when not None) as one
    JSON line; leave (``leave_ranks``)."""
    result = main(json.loads(sys.argv[1]))
    if result is not None:
        print(json.dumps(result))
    leave_ranks()


if __name__ == "__main__":
    _zygote(json.loads(sys.argv[1]))
