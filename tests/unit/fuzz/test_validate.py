"""Fuzz plugin_utils._validate's readers of user input (rails, pairs) and the job names built from inventory names:
only ValidateInputError (its typed error), ids always safe and within rdma_perftest's 100 characters."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.plugin_utils import _validate as v
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, odd_text, typed_only

SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), odd_text(3),
                   st.sampled_from(list(HUGE_NUMBERS)))
RAIL = st.one_of(
    st.sampled_from(["mlx5_0", "mlx5_1:2", "mlx5_0:", ":1", "a b", "mlx5_0:\u0663", "mlx5_0:" + "1" * 5000, "x:1:2", ""]),
    st.fixed_dictionaries({"device": SCALAR}, optional={"port": SCALAR, "netns": SCALAR}),
    st.dictionaries(st.text(max_size=4), SCALAR, max_size=2), SCALAR, st.lists(SCALAR, max_size=2))


def only_validate_errors(func, *args):
    try:
        return typed_only(func, *args)
    except v.ValidateInputError as exc:
        return exc


@given(st.one_of(st.lists(RAIL, max_size=4), st.none()))
def test_parse_rails_typed(value):
    rails = only_validate_errors(v.parse_rails, value)
    if isinstance(rails, list):
        assert all(isinstance(r["port"], int) and r["device"] for r in rails)


HOSTS = st.lists(st.one_of(st.sampled_from(["node1", "node2", "n3.example.com"]), odd_text(3)), max_size=4, unique=True)


@given(HOSTS, st.lists(st.one_of(st.lists(SCALAR, max_size=3), st.tuples(SCALAR, SCALAR),
                                 st.fixed_dictionaries({}, optional={"client": SCALAR, "server": SCALAR}), SCALAR),
                       max_size=3))
def test_pairs_typed(hosts, pairs):
    out = only_validate_errors(v.explicit_pairs, hosts, pairs)
    if isinstance(out, list):
        assert all(a in hosts and b in hosts and a != b for a, b in out)
    assert len(v.ring_pairs(hosts)) in (0, 1, len(hosts))


@given(st.one_of(st.text(max_size=200), byte_soup(200)), st.one_of(st.text(max_size=200), byte_soup(200)),
       st.integers(0, 10 ** 6))
def test_job_id_is_safe_and_short(client, server, rail):
    job = typed_only(v.job_id, client, server, rail)
    assert len(job) <= v.JOB_ID_MAX and not v._ID_UNSAFE.search(job)  # pylint: disable=protected-access
