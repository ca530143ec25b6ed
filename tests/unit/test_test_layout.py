"""The test tree's own rule: every test module under pytest.ini's testpaths has a name of its own.

The test folders are not packages, so pytest imports each test module by its file name ("prepend" import mode): a
second ``test_x.py`` anywhere fails the whole collection ("import file mismatch"), and only a run of the whole suite
shows it (a CI rehearsal did: a new layers/test_topology.py beside fuzz/test_topology.py).
"""

import collections
import configparser
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_test_module_has_a_name_of_its_own():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "pytest.ini")
    testpaths = parser["pytest"]["testpaths"].split()
    assert testpaths, "pytest.ini names no testpaths"
    seen = collections.defaultdict(list)
    for testpath in testpaths:
        for path in sorted((ROOT / testpath).rglob("*.py")):
            if path.name.startswith("test_") or path.name.endswith("_test.py"):
                seen[path.name].append(str(path.relative_to(ROOT)))
    assert seen, "no test module found under %s" % testpaths
    assert dict((name, paths) for name, paths in seen.items() if len(paths) > 1) == {}
