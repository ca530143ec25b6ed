"""A one-rail ConnectX-7 InfiniBand node, the spec the counters tests (hwsim and validate) mount."""

#: one ConnectX-7 InfiniBand rail on a host bridge without NUMA information (nothing to pin), two CPUs
RAIL_SPEC = """name: %(name)s
description: one ConnectX-7 InfiniBand rail
kernel: {release: 6.1.0-28-amd64, cmdline: "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro"}
numa: [{id: 0, cpus: "0-1"}]
modules: {loaded: [ib_core, ib_uverbs, ib_umad, ib_cm, rdma_cm, mlx5_core, mlx5_ib, ib_ipoib]}
pci:
  - host_bridge: "0000:00"
    numa_node: -1
    children:
      - bridge: "0000:00:01.0"
        model: intel-rootport
        children:
          - nic: "0000:01:00.0"
            guid: "%(guid)s"
            firmware: {SRIOV_EN: false, NUM_OF_VFS: 0, LINK_TYPE_P1: IB}
            functions: [{rdma: mlx5_0, lid: %(lid)d, sm_lid: 1%(extra)s}]
"""


def rail_spec(tmp_path, name, guid="a088:c203:0055:aa00", lid=0x11, extra=""):
    path = tmp_path / ("%s.yaml" % name)
    path.write_text(RAIL_SPEC % {"name": name, "guid": guid, "lid": lid, "extra": extra}, encoding="utf-8")
    return path
