"""The `torch.backends` entry point: `import torch` calls `flyops_autoload._autoload()`.

A package of its own, because importing anything inside `flyops` would run
`flyops/__init__.py`, which loads the library: the checks below must come first.
PyTorch turns any exception raised here into a failed `import torch`, so `_autoload`
catches everything, warns once and leaves flyops off. It compares the running torch with
the one the library was built for before loading it, since a binary built for another
torch can crash beyond catching. Nothing here touches CUDA.
"""

import importlib.util
import os


def package_dir():
    spec = importlib.util.find_spec("flyops")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def build_info(pkg_dir):
    """The flyops/_build_info.py written at build time, read without importing flyops."""
    path = os.path.join(pkg_dir, "_build_info.py")
    if not os.path.isfile(path):
        return None
    values = {}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), values)  # noqa: S102 - our own generated file
    return values


def library_path(pkg_dir, info):
    return os.environ.get("FLYOPS_LIBRARY") or os.path.join(pkg_dir, "lib", info["LIBRARY"])


def incompatibility(torch_version):
    """Why the built library must not be loaded into this torch, or None if it may."""
    pkg = package_dir()
    if pkg is None:
        return "the flyops package is not installed"
    info = build_info(pkg)
    if info is None:
        return "flyops is not built (no _build_info.py); install it with pip"
    if torch_version != info["TORCH_VERSION"]:
        return (f"flyops was built for torch {info['TORCH_VERSION']} but torch "
                f"{torch_version} is running; rebuild flyops")
    if not os.path.isfile(library_path(pkg, info)):
        return f"flyops library missing at {library_path(pkg, info)}"
    return None


def _autoload():
    try:
        if os.environ.get("FLYOPS_AUTOLOAD", "1") == "0":
            return
        import torch

        problem = incompatibility(torch.__version__)
        if problem is not None:
            _warn(problem)
            return
        import flyops  # noqa: F401  (loads the library and registers the overrides)
    except Exception as e:  # noqa: BLE001 - nothing may escape into `import torch`
        _warn(f"{type(e).__name__}: {e}")


def _warn(reason):
    import warnings

    warnings.warn(f"flyops is off: {reason}", RuntimeWarning, stacklevel=2)
