"""flyops: Hopper kernels behind PyTorch's own ops.

After `import flyops` (or just `import torch`, through the `torch.backends` entry point)
calls such as `F.rms_norm` run flyops kernels where they are correct and faster, and the
stock kernels everywhere else. Controls:

    flyops.disable() / flyops.enable()          process-wide switch
    with flyops.disabled(): ...                  this thread, and autograd work it starts
    with flyops.disabled("rms_norm"): ...        only some ops
    flyops.disable_op("rms_norm_backward")       process-wide, one op
    FLYOPS_DISABLE=1                              start disabled
    FLYOPS_LOG=1 / flyops.set_log(1)              one stderr line per routing decision
    flyops.stats()                                calls per op: flyops, stock, stock reasons
"""

import json as _json

import torch as _torch

from . import _load

_load.load()

_ops = _torch.ops.flyops

__version__ = _json.loads(_ops.build_info())["version"]


def build_info():
    """What the library was built for: {'version', 'torch', 'cuda_arch'}."""
    return _json.loads(_ops.build_info())


def ops():
    """Names of the ops flyops can take over."""
    return _ops.op_names().split(",")


def enable():
    _ops.set_enabled(True)


def disable():
    _ops.set_enabled(False)


def is_enabled():
    """The process-wide switch (FLYOPS_DISABLE=1 starts it off)."""
    return bool(_ops.is_enabled())


def enable_op(name):
    _ops.set_op_enabled(name, True)


def disable_op(name):
    _ops.set_op_enabled(name, False)


def op_enabled(name):
    return bool(_ops.op_enabled(name))


def active(name):
    """Whether a call of `name` made now, on this thread, may go to flyops."""
    return bool(_ops.active(name))


class disabled:
    """Context manager (and decorator) that sends calls on this thread to stock kernels.

    With op names, only those ops. It also governs the backward pass that autograd runs
    on its own threads for work started inside it (`with flyops.disabled(): loss.backward()`).
    """

    def __init__(self, *names):
        for n in names:
            if n not in ops():
                raise ValueError(f"flyops: unknown op {n!r}; known: {ops()}")
        self._names = ",".join(names)

    def __enter__(self):
        _ops.push_disabled(self._names)
        return self

    def __exit__(self, *exc):
        _ops.pop_disabled()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with disabled(*self._names.split(",") if self._names else ()):
                return fn(*args, **kwargs)

        return wrapper


def set_log(level=1):
    """0: quiet. 1: one line per routing decision, repeats counted. 2: every line."""
    _ops.set_log_level(int(level))


def log_level():
    return int(_ops.log_level())


def stats():
    """{op: {'flyops': n, 'stock': n, 'stock_reasons': {reason: n}}} since start or reset."""
    return _json.loads(_ops.stats())


def reset_stats():
    _ops.reset_stats()


__all__ = [
    "active", "build_info", "disable", "disable_op", "disabled", "enable", "enable_op",
    "is_enabled", "log_level", "op_enabled", "ops", "reset_stats", "set_log", "stats",
]
