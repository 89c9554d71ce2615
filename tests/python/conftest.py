import os
import zlib

import pytest
import torch

# Inputs are fresh each run: torch is seeded per test from this run's seed (in the report
# header) and the test's id, so FLYOPS_TEST_SEED=<seed> repeats a run's inputs exactly, for
# one test or all of them.
RUN_SEED = int(os.environ.get("FLYOPS_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (9, 0)


def pytest_report_header(config):
    return f"flyops test seed: {RUN_SEED} (FLYOPS_TEST_SEED={RUN_SEED} repeats these inputs)"


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    torch.manual_seed(RUN_SEED ^ zlib.crc32(request.node.nodeid.encode()))


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
