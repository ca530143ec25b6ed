"""Fuzz _topology: BDFs, sysfs device paths, CPU lists and masks (bounded: no range may fill the memory), distance
classes and sort keys; CPU lists and masks round-trip through format_cpulist."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, huge, long_line, mutated, odd_text, typed_only

HEX = st.text("0123456789abcdefABCDEF", min_size=1, max_size=9)
BDF = st.one_of(
    st.tuples(HEX, HEX, HEX, st.text("0123456789", min_size=1, max_size=2)).map(lambda t: "%s:%s:%s.%s" % t),
    st.sampled_from(["0000:3b:00.0", "10000:01:00.0", "0000:3B:00.7", "0000:3b:00.8", "3b:00.0", "0000:3b:00.0\n",
                     " 0000:3b:00.0 "]),
    odd_text(4))
PATH_PART = st.one_of(BDF, st.sampled_from(["pci0000:17", "pci10000:00", "PCI0000:00", "devices", "sys", "..", ".",
                                            "LNXSYSTM:00", "infiniband", "mlx5_0", "net", "ib0", ""]), odd_text(3))
DEVICE_PATH = st.one_of(st.lists(PATH_PART, max_size=10).map(lambda parts: "/sys/devices/" + "/".join(parts)),
                        mutated(st.just("/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:1a:00.0/infiniband/mlx5_0")),
                        st.none(), st.integers(), byte_soup(40))
NUMBER = st.one_of(st.integers(0, 70000).map(str), st.sampled_from(list(HUGE_NUMBERS) + ["\u0663", "\u00b2", ""]))
CPULIST = st.one_of(st.lists(st.one_of(NUMBER, st.tuples(NUMBER, NUMBER).map("-".join)), max_size=6).map(",".join),
                    st.sampled_from(["0-4294967295", "0-" + "9" * 40, "3-1", "0-3\n", "\x000-1", " ", None]),
                    odd_text(4))
MASK = st.one_of(st.lists(st.text("0123456789abcdefABCDEF", max_size=8), max_size=6).map(",".join),
                 st.sampled_from(["f" * 5000, "ffffffff," * 300, "0", ",", "ff\n", None]), odd_text(4))


@given(BDF)
def test_bdf_never_raises_and_normalizes(text):
    parts = typed_only(topo.parse_bdf, text)
    if parts is not None:
        normal = topo.normalize_bdf(text)
        assert topo.parse_bdf(normal) == parts and topo.normalize_bdf(normal) == normal
    topo.bdf_key(text)


@given(DEVICE_PATH, DEVICE_PATH, st.one_of(st.integers(-2, 3), st.none(), st.booleans(), st.text(max_size=2)),
       st.one_of(st.integers(-2, 3), st.none()), st.booleans())
def test_paths_and_classes_never_raise(path_a, path_b, numa_a, numa_b, single):
    pos_a, pos_b = typed_only(topo.pci_path, path_a), typed_only(topo.pci_path, path_b)
    for pos in (pos_a, pos_b):
        if pos is not None:
            assert topo.is_bdf(pos["bdf"]) and all(topo.is_bdf(b) for b in pos["bridges"])
    level = typed_only(topo.classify, pos_a, pos_b, numa_a, numa_b, single)
    assert level is None or level in topo.LEVELS
    assert level == topo.classify(pos_b, pos_a, numa_b, numa_a, single)


@given(CPULIST)
def test_cpulist_bounded(text):
    try:
        cpus = typed_only(topo.parse_cpulist, text)
    except ValueError:
        return  # the documented refusal of a malformed list; callers report it as a problem
    if cpus is not None:
        assert topo.parse_cpulist(topo.format_cpulist(cpus)) == sorted(set(cpus))


@given(MASK)
def test_cpumask_bounded(text):
    try:
        cpus = typed_only(topo.cpumask_to_list, text)
    except ValueError:
        return
    if cpus is not None:
        assert cpus == sorted(cpus) and topo.parse_cpulist(topo.format_cpulist(cpus)) == cpus


@given(st.sets(st.integers(0, 8191), max_size=80))
def test_cpulist_and_mask_round_trip(cpus):
    text = topo.format_cpulist(cpus)
    assert topo.parse_cpulist(text) == sorted(cpus)
    value = sum(1 << cpu for cpu in cpus)
    words = []
    while True:
        words.insert(0, "%08x" % (value & 0xFFFFFFFF))
        value >>= 32
        if not value:
            break
    assert topo.cpumask_to_list(",".join(words)) == sorted(cpus)


@given(st.lists(st.one_of(st.sampled_from(["mlx5_0", "mlx5_10", "mlx5_2", "ib0", "ib0.8001", "eth10", "\u00b2",
                                           "\u0663", "1" * 5000, "", "a1", "1a", "01"]), odd_text(4)), max_size=8))
def test_natural_key_sorts_any_names(names):
    ordered = typed_only(sorted, names, key=topo.natural_key)
    assert sorted(ordered, key=topo.natural_key) == ordered


@huge()
@given(st.one_of(long_line(("0-1,", ",", "ff", "0"), 20_000, 200_000)))
def test_huge_lists(text):
    for func in (topo.parse_cpulist, topo.cpumask_to_list):
        try:
            typed_only(func, text)
        except ValueError:
            pass
