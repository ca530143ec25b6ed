"""Fuzz _persisted: BLS entries, grubenv, sysctl.d, modules-load.d and the SR-IOV state file never make the readers
raise, in linear time; persisted_facts on a generated node tree never fails (problems instead)."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _persisted as P
from unit.fuzz.strategies import HUGE_NUMBERS, byte_soup, examples, huge, long_line, nested, node_text, node_tree, \
    odd_text, slow, typed_only
from unit.fuzz.test_cmdline import CMDLINE

BLS_LINE = st.one_of(
    st.tuples(st.sampled_from(["title", "version", "linux", "options", "initrd", "  options", "options\t", "#options",
                               "\u00e9t\u00e9", "options"]), st.sampled_from([" ", "\t", "   "]),
              st.one_of(CMDLINE, st.sampled_from(["$kernelopts", "${tuned_params}", "6.1.0-28-amd64", "/vmlinuz-6.1.0"])),
              st.sampled_from(["", " ", "\t "])).map("".join),
    st.sampled_from(["", "options", "# c"]))
GRUBENV_LINE = st.one_of(st.tuples(st.sampled_from(["kernelopts", "tuned_params", "saved_entry", "#", ""]),
                                   st.sampled_from(["=", "==", ""]), CMDLINE).map("".join), st.just("#" * 64))
SYSCTL_LINE = st.one_of(
    st.tuples(st.sampled_from(["", "-", " - "]),
              st.sampled_from(["net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.*.rp_filter", "net/ipv4/conf/eth0.100/arp_announce",
                               "net.ipv4.conf.ib[0-9].rp_filter", "net.ipv4.conf.[.rp_filter", "kernel.x", ""]),
              st.sampled_from([" = ", "=", " =\t"]),
              st.one_of(st.integers(-5, 10).map(str), st.sampled_from(list(HUGE_NUMBERS) + ["\u0663", "1 2", ""]))).map("".join),
    st.sampled_from(["# c", "; c", "", "garbage"]))
MODULES_LINE = st.one_of(st.sampled_from(["ib_umad", "rdma_ucm  # c", "; c", "# c", "", "  mlx5-ib  ", "a b"]), odd_text(4))
STATE = st.one_of(
    st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=5)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
                     ["sriov_vfs", "ib_vf_guids", "pci_address", "netdev", "num_vfs", "x"]), inner, max_size=4)),
                 max_leaves=12).map(json.dumps),
    st.just('{"sriov_vfs": [], "ib_vf_guids": [{"pci_address": "a"}, {"pci_address": null}, {}]}'),
    st.just('{"sriov_vfs": [], "ib_vf_guids": [{"pci_address": "a"}, {"pci_address": 1}]}'),
    nested("[", "]", prefix='{"sriov_vfs": ', suffix="}"), byte_soup())
BLS = node_text(BLS_LINE, ("options ", " ", "\t", "$"))
GRUBENV = node_text(GRUBENV_LINE, ("=", "#"))
SYSCTL = node_text(SYSCTL_LINE, ("net.ipv4.conf.all.rp_filter = ", "=", "-", " "))
MODULES = node_text(MODULES_LINE, ("#", ";", " "))


@slow()
@given(BLS, GRUBENV)
def test_bls_and_grubenv_never_raise(bls, grubenv):
    entry = typed_only(P.parse_bls_entry, bls)
    env = typed_only(P.parse_grubenv, grubenv)
    args = typed_only(P.expand_grub_vars, P._cmdline.split_raw(entry.get("options", "")), env)
    assert isinstance(args, list)
    # each line's value is stripped ("options" lines are joined with a blank: an empty one leaves a trailing one)
    assert all(value == value.strip() for key, value in entry.items() if key != "options")


@slow()
@given(st.lists(st.tuples(st.sampled_from(["/etc/sysctl.d/a.conf", "/usr/lib/sysctl.d/50-default.conf"]), SYSCTL),
                max_size=3), st.lists(st.one_of(st.sampled_from(["ib0", "eth0.100", "all", "ib1"]), odd_text(3)), max_size=4))
def test_sysctl_never_raises(files, interfaces):
    out = typed_only(P.persisted_sysctl, files, interfaces)
    assert set(["all", "default"]) <= set(out)


@given(MODULES)
def test_modules_load_never_raises(text):
    assert all(name and " " not in name for name in typed_only(P.modules_load_names, text))


@given(STATE)
def test_sriov_state_summary_raises_value_error_only(text):
    """Its documented refusal is ValueError (persisted_facts reports it as a problem); nothing else may escape."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    try:
        typed_only(P.sriov_state_summary, data)
    except ValueError:
        pass


@settings(max_examples=examples(0.1))  # a real tree per example: 10 % of the profile's count
@given(st.fixed_dictionaries({}, optional={
    "/boot/grub/grub.cfg": st.one_of(st.just("insmod blscfg\n"), node_text(st.sampled_from(["linux /vmlinuz ro", "blscfg"]))),
    "/boot/loader/entries/a.conf": BLS, "/boot/loader/entries/b.conf": BLS, "/boot/grub2/grubenv": GRUBENV,
    "/proc/sys/kernel/osrelease": st.sampled_from(["6.1.0-28-amd64\n", ""]),
    "/etc/sysctl.d/90-rdma.conf": SYSCTL, "/etc/sysctl.conf": SYSCTL, "/etc/modules-load.d/rdma.conf": MODULES,
    "/etc/modules": MODULES, "/etc/modprobe.d/ib_core.conf": st.sampled_from(["options ib_core netns_mode=0\n",
                                                                              "options ib_core netns_mode=x\n"]),
    "/etc/rdma-k8s-node/sriov.json": STATE}), st.lists(st.sampled_from(["ib0", "eth0"]), max_size=2))
def test_persisted_facts_never_fail(files, interfaces):
    with node_tree(files) as host:
        facts = typed_only(P.persisted_facts, host, interfaces)
    assert isinstance(facts, dict) and isinstance(facts["problems"], list), facts


@huge()
@given(long_line(("options ", " ", "a", "\t", "=", "#", "net.ipv4.conf.all.rp_filter = "), 20_000, 200_000))
def test_huge_lines(text):
    typed_only(P.parse_bls_entry, text)
    typed_only(P.parse_grubenv, text)
    typed_only(P.persisted_sysctl, [("/x", text)], ["ib0"])
    typed_only(P.modules_load_names, text)
