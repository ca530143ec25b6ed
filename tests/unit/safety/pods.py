"""Pods taking VFs on a simulated node, as the SR-IOV CNI and (in exclusive mode) the RDMA CNI do: the converge/audit
property tests of both suites (test_converge_audit.py, test_converge_audit_nic.py) move VFs into pods with it."""

from hypothesis import strategies as st


def pods_take(node, data, vfs, pods):
    """A random subset of ``vfs`` (at least one when there are any) goes to pods drawn from ``pods``: each VF's netdev
    moves into its pod's namespace as ``net<N>`` (the N-th VF of that pod), and in exclusive mode its RDMA device too
    (the simulator's ``vf_set_netns``).  Returns ``{vf: (pod, what moved)}``."""
    chosen = data.draw(st.lists(st.sampled_from(vfs), unique=True, min_size=1, max_size=len(vfs)), label="VFs in pods") \
        if vfs else []
    taken = {}
    for vf in chosen:
        pod = data.draw(st.sampled_from(pods), label="pod of %s" % vf)
        if pod not in node.call({"cmd": "dump"})["netns"]:
            node.call({"cmd": "netns_add", "name": pod})
        ifname = "net%d" % (1 + sum(1 for other, dummy in taken.values() if other == pod))
        taken[vf] = (pod, node.call({"cmd": "vf_set_netns", "bdf": vf, "netns": pod, "ifname": ifname}))
    return taken
