"""Finding, checking and loading the flyops library. Nothing here touches CUDA."""

import os

_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
_loaded = False


def library_path():
    from . import _build_info

    return os.environ.get("FLYOPS_LIBRARY") or os.path.join(_LIB_DIR, _build_info.LIBRARY)


def incompatibility(torch_version):
    """Why the built library must not be loaded into this torch, or None if it may."""
    try:
        from . import _build_info
    except ImportError:
        return "flyops is not built (no _build_info); install it with pip"
    if torch_version != _build_info.TORCH_VERSION:
        return (f"flyops was built for torch {_build_info.TORCH_VERSION} but torch "
                f"{torch_version} is running; rebuild flyops")
    if not os.path.isfile(library_path()):
        return f"flyops library missing at {library_path()}"
    return None


def load():
    """Load the library once. Raises RuntimeError with the reason when it cannot."""
    global _loaded
    if _loaded:
        return
    import torch

    problem = incompatibility(torch.__version__)
    if problem is not None:
        raise RuntimeError(problem)
    try:
        torch.ops.load_library(library_path())
        torch.ops.flyops._register_overrides()
    except Exception as e:  # a broken file, missing symbols, ...
        raise RuntimeError(f"flyops library failed to load: {e}") from e
    _loaded = True


def loaded():
    return _loaded
