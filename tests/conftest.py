"""Process-wide test setup shared by tests/unit and tests/bench."""

import hwsim.bind


def pytest_configure(config):  # pylint: disable=unused-argument
    """Enter a private mount namespace (when root) before any simulated node is mounted: the host roots that tests
    assemble with bind mounts (hwsim/bind.py) and the simulator's FUSE mounts then live and die with this process."""
    hwsim.bind.available()
