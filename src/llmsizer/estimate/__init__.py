"""The composition core's shared rules, each with one home.

Every command (``infer``, ``train``, ``fit``, ``recommend``, ``plan``, ``capacity``) and the Python API read
these instead of deciding for themselves:

- ``verdict``: headroom, the memory budget and the fit verdict (one convention for every command);
- ``formats``: which weight format an engine runs when the user does not name one;
- ``duration``: training FLOPs per token by method (full, LoRA, QLoRA) and the wall-clock time on a device.

The estimators themselves (``inference.estimate_inference``, ``training.estimate_training``) compose the
formulas and call these rules; ``fit`` (estimate/fit.py) and ``recommend`` (recommend.py) call the estimators
and read their verdict.
"""
