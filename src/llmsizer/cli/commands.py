"""The commands: which module registers each, and its one-line help (one home: the module's parser and the
top-level listing both read it, so `llmsizer --help` lists every command without importing any of them)."""

from __future__ import annotations

# command -> module that registers it. Only the module of the command being run is imported, so the CLI starts fast.
COMMANDS = {
    "models": "model_cmds",
    "inspect": "model_cmds",
    "formats": "model_cmds",
    "infer": "infer_cmd",
    "train": "train_cmd",
    "hardware": "hardware_cmd",
    "fit": "fit_cmd",
    "recommend": "recommend_cmd",
    "plan": "plan_cmd",
    "request": "request_cmd",
    "measure": "measure_cmd",
    "validate": "validate_cmd",
    "capacity": "capacity_cmd",
    "completion": "completion_cmd",
    "serve": "serve_cmd",
}

COMMAND_HELP = {
    "models": "list or search the built-in model catalog",
    "inspect": "architecture and parameter breakdown of a model",
    "formats": "list weight formats",
    "infer": "memory to serve a model (GPU or CPU), per engine",
    "train": "memory to train or fine-tune a model (full, LoRA, QLoRA), per device",
    "hardware": "list or show the hardware catalog (devices, cloud instances)",
    "fit": "does a workload fit on N x device; memory per device, speed",
    "recommend": "rank hardware for serving or training a model, by cost",
    "plan": "a request file in, a complete checked plan out (memory, hardware, storage, network, duration, cost, checks)",
    "request": "resource requests: write a template, validate one, print the JSON Schema",
    "measure": "measure a real run on this machine and compare it with the estimate",
    "validate": "llmsizer's error against published and measured runs",
    "capacity": "the provider's side: does a request fit the inventory; book, release, show utilisation",
    "completion": "print a shell completion script (bash or zsh)",
    "serve": "the web app and its JSON API on localhost (needs the web extra)",
}
