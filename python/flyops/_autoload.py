"""The `torch.backends` entry point: `import torch` calls `_autoload()`.

PyTorch turns any exception raised here into a failed `import torch`, so this function
catches everything, warns once and leaves flyops off. It checks the torch version before
loading the library, since a binary built for another torch can crash beyond catching.
"""


def _autoload():
    try:
        if _env_off():
            return
        import torch

        from . import _load

        problem = _load.incompatibility(torch.__version__)
        if problem is not None:
            _warn(problem)
            return
        import flyops  # noqa: F401  (loads the library and registers the overrides)
    except BaseException as e:  # noqa: BLE001 - nothing may escape into `import torch`
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        _warn(f"{type(e).__name__}: {e}")


def _env_off():
    import os

    return os.environ.get("FLYOPS_AUTOLOAD", "1") == "0"


def _warn(reason):
    import warnings

    warnings.warn(f"flyops is off: {reason}", RuntimeWarning, stacklevel=2)
