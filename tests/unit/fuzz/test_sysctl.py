"""Fuzz _sysctl: keys and values from the user are refused with InputError only; what validates renders a drop-in
whose ``key = value`` lines read back (through _persisted's sysctl.d reader) as the same settings."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _persisted
from ansible_collections.rdma.k8s_node.plugins.module_utils.layers.sysctl import rules as _sysctl
from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, mutated, odd_text, typed_only

COMPONENT = st.one_of(st.sampled_from(["net", "ipv4", "conf", "all", "default", "eth0", "eth0.100", "ib0", "arp_ignore",
                                       "rp_filter", "kernel", "..", ".", "", "a b", "x/y", "*"]),
                      st.text("abcxyz019_.:@+-", min_size=1, max_size=8))
KEY = st.one_of(st.lists(COMPONENT, min_size=1, max_size=6).map(".".join),
                st.lists(COMPONENT, min_size=1, max_size=6).map("/".join),
                st.lists(COMPONENT, min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts)),
                mutated(st.just("net.ipv4.conf.all.arp_ignore")), odd_text(6), byte_soup(20))
VALUE = st.one_of(st.integers(), st.sampled_from(list(HUGE_NUMBERS)), st.text("0123456789 \t-+abc,./:_", max_size=12),
                  st.floats(), st.booleans(), st.none(), odd_text(4), st.lists(st.integers(), max_size=2))


@given(KEY)
def test_keys_are_refused_with_input_errors(key):
    for func in (_sysctl.components, _sysctl.proc_path, _sysctl.display):
        result = typed_only(func, key)
        if not isinstance(result, InputError):
            path = _sysctl.proc_path(key)
            assert path.startswith("/proc/sys/") and "/../" not in path + "/" and "//" not in path


@given(KEY, VALUE)
def test_values_are_refused_with_input_errors(key, value):
    result = typed_only(_sysctl.normalize_value, key, value)
    assert isinstance(result, (str, InputError))


@given(st.one_of(st.dictionaries(KEY, VALUE, max_size=5), st.none(), st.lists(KEY, max_size=2), st.text(max_size=5)))
def test_drop_in_reads_back(settings):
    valid = typed_only(_sysctl.validate, settings)
    if isinstance(valid, InputError):
        return
    text = _sysctl.render(valid)
    read = dict((key, value) for key, value, dummy in _persisted.sysctl_assignments(text))
    assert read == dict((key, " ".join(value.split("\t"))) for key, value in valid.items())
    for key, value in valid.items():
        assert not _sysctl.differs(value.replace("\t", " "), value)


@given(st.one_of(st.none(), st.text(max_size=10), odd_text(4)), st.text(max_size=10),
       st.dictionaries(st.sampled_from(["all", "eth0", "ib0"]), st.dictionaries(
           st.sampled_from(list(_sysctl.MAX_RULE) + ["forwarding"]), st.one_of(st.integers(-5, 5), st.none()))),
       st.sampled_from(list(_sysctl.MAX_RULE) + ["forwarding"]), st.sampled_from(["eth0", "ib0", "all"]))
def test_differs_and_effective_never_raise(live, wanted, values, param, interface):
    typed_only(_sysctl.differs, live, wanted)
    typed_only(_sysctl.effective, values, param, interface)
