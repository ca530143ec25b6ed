"""Pure PCI topology: BDF parsing, sysfs ancestry and the nvidia-smi distance classes, table-driven."""

import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _topology as topo

# -- BDF parsing -------------------------------------------------------------------------------------------------

BDF_CASES = [
    ("0000:1a:00.0", {"domain": 0, "bus": 0x1A, "device": 0, "function": 0}, "0000:1a:00.0"),
    ("0000:AF:06.7", {"domain": 0, "bus": 0xAF, "device": 6, "function": 7}, "0000:af:06.7"),
    ("10000:00:04.0", {"domain": 0x10000, "bus": 0, "device": 4, "function": 0}, "10000:00:04.0"),  # VMD / hwloc 2pa
    ("0101:00:00.0", {"domain": 0x101, "bus": 0, "device": 0, "function": 0}, "0101:00:00.0"),  # Azure per-device domain
    ("deadbeef:ff:1f.7", {"domain": 0xDEADBEEF, "bus": 0xFF, "device": 0x1F, "function": 7}, "deadbeef:ff:1f.7"),
    (" 0035:04:00.0\n", {"domain": 0x35, "bus": 4, "device": 0, "function": 0}, "0035:04:00.0"),
]
BAD_BDFS = ["", "1a:00.0", "000:1a:00.0", "0000:1a:00.8", "0000:1a:00", "0000:1g:00.0", "pci0000:00",
            "123456789:00:00.0", None, 42]


@pytest.mark.parametrize("text, parts, normal", BDF_CASES)
def test_parse_bdf(text, parts, normal):
    assert topo.parse_bdf(text) == parts
    assert topo.is_bdf(text)
    assert topo.normalize_bdf(text) == normal


@pytest.mark.parametrize("text", BAD_BDFS)
def test_parse_bdf_rejects(text):
    assert topo.parse_bdf(text) is None
    assert not topo.is_bdf(text)
    assert topo.normalize_bdf(text) is None


# -- ancestry ------------------------------------------------------------------------------------------------------

PATH_CASES = [
    # hwloc 32intel64: ConnectX-4 behind a PLX switch (root port, upstream, downstream, endpoint)
    ("/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0",
     "pci0000:17", "0000:1a:00.0", ["0000:17:00.0", "0000:18:00.0", "0000:19:04.0"]),
    # an RDMA class device: trailing non-PCI components are ignored
    ("/sys/devices/pci0000:80/0000:80:02.2/0000:82:00.0/infiniband/mlx4_0", "pci0000:80", "0000:82:00.0", ["0000:80:02.2"]),
    # netdev below a virtio device
    ("/sys/devices/pci0000:00/0000:00:03.0/virtio0/net/ens3", "pci0000:00", "0000:00:03.0", []),
    # 5-hex-digit domain (hwloc 2pa-pcidomain32bits), trailing slash as the link has it
    ("/sys/devices/pci10000:00/10000:00:04.0/", "pci10000:00", "10000:00:04.0", []),
    # Hyper-V guest: host bridge below non-PCI parents, one domain per device
    ("/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/00000001-0001/pci0001:00/0001:00:00.0",
     "pci0001:00", "0001:00:00.0", []),
    # Intel VMD: the nested host bridge is skipped, the VMD function stays a bridge of the chain
    ("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0",
     "pci0000:00", "10000:01:00.0", ["0000:00:0e.0", "10000:00:02.0"]),
    # upper case in a hand-made tree is normalised
    ("/sys/devices/pci0000:AE/0000:AE:00.0/0000:AF:00.1", "pci0000:ae", "0000:af:00.1", ["0000:ae:00.0"]),
]


@pytest.mark.parametrize("path, host_bridge, bdf, bridges", PATH_CASES)
def test_pci_path(path, host_bridge, bdf, bridges):
    assert topo.pci_path(path) == {"host_bridge": host_bridge, "bdf": bdf, "bridges": bridges}


@pytest.mark.parametrize("path", [
    None, "", "/sys/devices/virtual/infiniband/rxe0", "/sys/devices/scif_dma_0/infiniband/scif0",
    "/sys/bus/pci/devices/0004:05:00.0",  # nvidiagpunumanodes: a plain directory, no chain
    "/sys/devices/pci0000:00",  # a host bridge alone is not a function
])
def test_pci_path_not_pci(path):
    assert topo.pci_path(path) is None


@pytest.mark.parametrize("bridges, units", [
    ([], []),
    (["rp"], ["rp"]),
    (["rp", "up", "down"], ["rp", "up"]),
    (["rp", "up1", "down1", "up2", "down2"], ["rp", "up1", "up2"]),
    (["rp", "up"], ["rp", "up"]),  # an endpoint integrated in the switch (on its internal bus)
])
def test_switch_units(bridges, units):
    assert topo.switch_units(bridges) == units


# -- classification ----------------------------------------------------------------------------------------------

def P(path):
    return topo.pci_path(path)


HB17 = "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0"
HB3A = "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
# hwloc 32intel64-2p8co2t+8ve: Vector Engines and ConnectX-4s behind two PLX PEX9797 switches, all NUMA 0
VE_1B = P(HB17 + "/0000:19:08.0/0000:1b:00.0")
CX4_1A = P(HB17 + "/0000:19:04.0/0000:1a:00.0")
VE_3D = P(HB3A + "/0000:3c:04.0/0000:3d:00.0")
CX4_3E = P(HB3A + "/0000:3c:08.0/0000:3e:00.0")
# DGX A100-like: two switch levels (root port, upper switch, lower switch)
UPPER = "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:00.0"
A100_GPU0 = P(UPPER + "/0000:43:00.0/0000:44:10.0/0000:47:00.0")
A100_GPU1 = P(UPPER + "/0000:43:00.0/0000:44:14.0/0000:4a:00.0")
A100_NIC2 = P(UPPER + "/0000:48:00.0/0000:49:00.0/0000:4b:00.0")
A100_NIC3 = P(UPPER + "/0000:48:00.0/0000:49:00.0/0000:4b:00.1")
RP_ONLY_A = P("/sys/devices/pci0000:40/0000:40:03.1/0000:50:00.0")
RP_ONLY_A1 = P("/sys/devices/pci0000:40/0000:40:03.1/0000:50:00.1")
RP_ONLY_B = P("/sys/devices/pci0000:40/0000:40:03.2/0000:51:00.0")
ROOT_BUS_A = P("/sys/devices/pci0000:00/0000:00:04.0")
ROOT_BUS_B = P("/sys/devices/pci0000:00/0000:00:05.0")
OTHER_HB = P("/sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0")

CLASSIFY_CASES = [
    # id, a, b, numa_a, numa_b, single_numa, expected
    ("same switch, different downstream ports", VE_1B, CX4_1A, 0, 0, False, "PIX"),
    ("same switch, NUMA irrelevant", VE_1B, CX4_1A, None, None, False, "PIX"),
    ("different host bridges, same NUMA", VE_1B, CX4_3E, 0, 0, False, "NODE"),
    ("different host bridges, different NUMA", VE_3D, CX4_1A, 1, 0, False, "SYS"),
    ("two switch levels, different lower switches", A100_GPU0, A100_NIC2, 0, 0, False, "PXB"),
    ("two switch levels, same lower switch", A100_GPU0, A100_GPU1, 0, 0, False, "PIX"),
    ("dual-port card, same downstream port", A100_NIC2, A100_NIC3, 0, 0, False, "PIX"),
    ("lower switch vs upper switch's direct child", A100_GPU0, P(UPPER + "/0000:4c:00.0"), 0, 0, False, "PXB"),
    ("different root ports, same host bridge", RP_ONLY_A, RP_ONLY_B, 0, 0, False, "PHB"),
    ("switch vs plain root port, same host bridge", A100_GPU0, RP_ONLY_B, 0, 0, False, "PHB"),
    ("two functions on one root port", RP_ONLY_A, RP_ONLY_A1, 0, 0, False, "PIX"),
    ("flat root bus (VM)", ROOT_BUS_A, ROOT_BUS_B, None, None, False, "PHB"),
    ("different host bridges, NUMA unknown on one side", A100_GPU0, OTHER_HB, 0, None, False, None),
    ("different host bridges, NUMA -1 on both sides", A100_GPU0, OTHER_HB, -1, -1, False, None),
    ("different host bridges, NUMA unknown, single NUMA machine", A100_GPU0, OTHER_HB, None, -1, True, "NODE"),
    ("different host bridges, known NUMA wins over single_numa", A100_GPU0, OTHER_HB, 0, 1, True, "SYS"),
    ("PCI position unknown, different NUMA", None, CX4_1A, 1, 0, False, "SYS"),
    ("PCI position unknown, same NUMA", None, CX4_1A, 0, 0, False, None),
    ("PCI position unknown, NUMA unknown", None, None, None, None, True, None),
    ("bool is not a NUMA node", A100_GPU0, OTHER_HB, True, False, False, None),
]


@pytest.mark.parametrize("a, b, numa_a, numa_b, single, expected", [c[1:] for c in CLASSIFY_CASES],
                         ids=[c[0] for c in CLASSIFY_CASES])
def test_classify(a, b, numa_a, numa_b, single, expected):
    assert topo.classify(a, b, numa_a, numa_b, single_numa=single) == expected
    # the relation is symmetric
    assert topo.classify(b, a, numa_b, numa_a, single_numa=single) == expected


def test_levels_order():
    assert topo.LEVELS == ("PIX", "PXB", "PHB", "NODE", "SYS")


# -- CPU lists and masks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, cpus", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0-1\n\x00", [0, 1]),  # hwloc captures keep a trailing NUL
    ("", []),
    ("5", [5]),
    (None, None),
])
def test_parse_cpulist(text, cpus):
    assert topo.parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a-b", "3-1", "0,,x"])
def test_parse_cpulist_malformed(text):
    with pytest.raises(ValueError):
        topo.parse_cpulist(text)


@pytest.mark.parametrize("mask, cpus", [
    ("0000,000000ff,ffffffff", list(range(40))),
    ("0000,00000000,000000ff,ff000000,00000000,00000000", list(range(88, 104))),  # nvidiagpunumanodes GPU
    ("00000000", []),
    ("f0", [4, 5, 6, 7]),
])
def test_cpumask_to_list(mask, cpus):
    assert topo.cpumask_to_list(mask) == cpus


def test_cpumask_malformed():
    with pytest.raises(ValueError):
        topo.cpumask_to_list("zz,00")


@pytest.mark.parametrize("cpus, text", [
    ([0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
    ([], ""),
    ([7], "7"),
    ([3, 1, 2, 2], "1-3"),
])
def test_format_cpulist(cpus, text):
    assert topo.format_cpulist(cpus) == text


def test_natural_key_orders_device_names():
    names = ["mlx5_10", "mlx5_2", "mlx5_0", "irdma0", "mlx5_1"]
    assert sorted(names, key=topo.natural_key) == ["irdma0", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"]


def test_bdf_key_orders_numerically_not_textually():
    addresses = ["0000:9d:00.0", "0000:43:00.0", "10000:00:04.0", "0000:1b:00.0", "garbage", "0001:00:00.0",
                 "0000:1b:00.1"]
    assert sorted(addresses, key=topo.bdf_key) == ["0000:1b:00.0", "0000:1b:00.1", "0000:43:00.0", "0000:9d:00.0",
                                                   "0001:00:00.0", "10000:00:04.0", "garbage"]


# -- found by the fuzz suite (tests/unit/fuzz/test_topology.py) ----------------------------------------------------
@pytest.mark.parametrize("text", ["0-4294967295", "0-" + "9" * 40, "65536", "0-1," + "1" * 5000])
def test_parse_cpulist_refuses_cpus_no_machine_has(text):
    """0-4294967295 built a list of 2^32 ints (the fuzz run was OOM-killed at 20 GB); 40 digits OverflowError,
    5,000 digits ValueError from int() (now the documented ValueError with its reason)."""
    with pytest.raises(ValueError, match="CPU number above 65535"):
        topo.parse_cpulist(text)
    assert topo.parse_cpulist("0-65535")[-1] == 65535


def test_cpumask_is_bounded_and_linear():
    """A mask wider than 65,536 bits is refused; leading zero words cost nothing (the bits were shifted out one by
    one, quadratic in the mask's width)."""
    with pytest.raises(ValueError, match="CPU above 65535"):
        topo.cpumask_to_list("1" + "00000000," * 2048 + "00000000")
    start = time.monotonic()
    assert topo.cpumask_to_list("00000000," * 100_000 + "00000003") == [0, 1]
    assert topo.cpumask_to_list(",".join(["ffffffff"] * 2048)) == list(range(65536))
    assert time.monotonic() - start < 2


def test_natural_key_sorts_names_int_refuses():
    """'²' is str.isdigit() but int() refuses it (ValueError), so is a run of 5,000 digits."""
    names = ["mlx5_" + "1" * 5000, "\u00b2", "mlx5_10", "mlx5_02", "mlx5_1"]
    assert sorted(names, key=topo.natural_key) == ["mlx5_1", "mlx5_02", "mlx5_10", "mlx5_" + "1" * 5000, "\u00b2"]
