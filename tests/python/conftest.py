import pytest
import torch


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (9, 0)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an sm_90 GPU (H100/H200); skipped elsewhere")
    config.addinivalue_line("markers", "large: big shapes (a second or more each); run by default, "
                                       "-m 'not large' leaves them out")


def pytest_collection_modifyitems(config, items):
    if _hopper():
        return
    skip = pytest.mark.skip(reason="needs an sm_90 GPU (H100/H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
