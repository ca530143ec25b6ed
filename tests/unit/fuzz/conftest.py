"""Hypothesis profiles of the fuzz suite (docs/fuzz.md).

``ci`` (the default): derandomized (the same examples on every run and machine), a small number of examples per
property so that the whole directory runs in well under a minute with ``pytest -n 2``; ``long``: at least 10,000
examples per property (``HYPOTHESIS_PROFILE=long``, what ``scripts/fuzz`` runs; ``FUZZ_EXAMPLES`` changes the count).  Neither writes an example
database into the repository (``database=None``); no deadline (this machine may share its two cores with CI).

A property may scale its count with :func:`unit.fuzz.strategies.examples` (a share of the profile's count, for the
few whose single example is slow); everything else takes the profile's count as it is.
"""

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

_COMMON = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    # generated inputs are big on purpose (10,000-level nesting, 100,000-character lines)
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                              HealthCheck.filter_too_much],
}
settings.register_profile("ci", derandomize=True, max_examples=40, **_COMMON)
# a failing long run still shrinks; "explain" only adds minutes to a failure report
settings.register_profile("long", derandomize=False, max_examples=int(os.environ.get("FUZZ_EXAMPLES", "10000")),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink], **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    """Strategies built from 5,000-digit numbers have long reprs: Hypothesis warns, which says nothing here."""
    for item in items:
        if "/fuzz/" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("ignore:Generating overly large repr"))
