"""Loading the flyops library, after the same checks the autoload entry point makes."""

import flyops_autoload as _checks

_loaded = False


def load():
    """Load the library once. Raises RuntimeError with the reason when it cannot."""
    global _loaded
    if _loaded:
        return
    import torch

    problem = _checks.incompatibility(torch.__version__)
    if problem is not None:
        raise RuntimeError(problem)
    pkg = _checks.package_dir()
    path = _checks.library_path(pkg, _checks.build_info(pkg))
    try:
        torch.ops.load_library(path)
        torch.ops.flyops._register_overrides()
    except Exception as e:  # a broken file, missing symbols, ...
        raise RuntimeError(f"flyops library failed to load: {e}") from e
    _loaded = True
