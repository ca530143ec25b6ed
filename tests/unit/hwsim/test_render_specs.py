"""Archetype specs rendered to plain trees: structural invariants, real-capture formats, real topo matrices."""

import json
import os
import tarfile
from pathlib import Path

import pytest

import hwsim
from hwsim import fmt, topo, vfs

ARCHETYPES = hwsim.archetypes()


def extract(tarball, target, prefixes):
    """Extract only the members under `prefixes` of a real hwloc capture (the full tarballs are large)."""
    with tarfile.open(tarball) as tar:
        members = [member for member in tar if member.name.startswith(prefixes)]
        tar.extractall(target, members=members, filter="data")
    return target


def test_required_archetypes_exist():
    for name in ("dgx-h100", "roce-cx6dx", "numa-split", "no-rdma", "dell-xe9680-12nic", "a100-10nic"):
        assert name in ARCHETYPES


@pytest.fixture(scope="module", params=ARCHETYPES)
def rendered(request, tmp_path_factory):
    """Each archetype rendered once."""
    root = tmp_path_factory.mktemp(request.param)
    hwsim.render(request.param, root)
    return root


def test_every_symlink_is_relative_and_resolves_inside_the_tree(rendered):
    real_root = os.path.realpath(rendered)
    for dirpath, dirnames, filenames in os.walk(rendered):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                assert not os.readlink(path).startswith("/"), path
                target = os.path.realpath(path)
                assert target.startswith(real_root + os.sep), path
                assert os.path.exists(target), path


def test_bus_pci_devices_and_class_links_resolve_to_pci_dirs(rendered):
    for link in (rendered / "sys/bus/pci/devices").iterdir():
        assert (link / "vendor").read_text(encoding="utf-8").startswith("0x")
        assert os.readlink(link).startswith("../../../devices/pci")
    for ib in (rendered / "sys/class/infiniband").iterdir():
        device = Path(os.path.realpath(ib / "device"))
        assert fmt.BDF_RE.match(device.name), ib
        assert (device / "vendor").read_text(encoding="utf-8") == "0x15b3\n"
        assert os.readlink(ib / "device") == f"../../../{device.name}"
    for net in (rendered / "sys/class/net").iterdir():
        assert os.readlink(net).startswith("../../devices/")


def test_driver_link_depth_matches_real_kernel(rendered):
    for link in (rendered / "sys/bus/pci/devices").iterdir():
        driver = Path(link) / "driver"
        if driver.is_symlink():
            depth = len(Path(os.path.realpath(link)).relative_to(os.path.realpath(rendered / "sys")).parts)
            assert os.readlink(driver).startswith("../" * depth + "bus/pci/drivers/")


def test_no_rdma_has_five_digit_domain_and_unknown_numa(tmp_path):
    hwsim.render("no-rdma", tmp_path)
    dev = tmp_path / "sys/bus/pci/devices/10000:01:00.0"
    assert os.readlink(dev) == "../../../devices/pci10000:00/10000:00:02.0/10000:01:00.0"
    assert (dev / "numa_node").read_text(encoding="utf-8") == "-1\n"
    assert (dev / "local_cpulist").read_text(encoding="utf-8") == "0-15\n"
    assert not (tmp_path / "sys/module/ib_core").exists()


def test_relative_link_algorithm_matches_hwloc_capture(realdata, tmp_path):
    """kernfs link text, checked against links in a real sysfs capture (hwloc 32em64t tarball)."""
    root = extract(realdata / "hwloc" / "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2", tmp_path,
                   ("32em64t-2n8c+1mic/sys/class/", "32em64t-2n8c+1mic/sys/bus/pci/devices/",
                    "32em64t-2n8c+1mic/sys/devices/pci0000:80/")) / "32em64t-2n8c+1mic"
    checked = 0
    for link in [root / "sys/class/net/ib0", root / "sys/class/net/ib0/device",
                 root / "sys/class/infiniband/mlx4_0/device", root / "sys/bus/pci/devices/0000:82:00.0"]:
        link_dir = Path(os.path.realpath(link.parent)).relative_to(os.path.realpath(root)).parts
        target = Path(os.path.realpath(link)).relative_to(os.path.realpath(root)).parts
        assert vfs.relative_target(list(link_dir), list(target)) == os.readlink(link)
        checked += 1
    assert checked == 4


def test_cpumask_format_matches_hwloc_capture(realdata, tmp_path):
    extract(realdata / "hwloc" / "32intel64-2p8co2t+8ve.tar.bz2", tmp_path,
            ("32intel64-2p8co2t+8ve/sys/bus/pci/devices/", "32intel64-2p8co2t+8ve/sys/devices/pci0000:17/"))
    dev = tmp_path / "32intel64-2p8co2t+8ve/sys/bus/pci/devices/0000:1a:00.0"
    cpus = fmt.parse_cpulist((dev / "local_cpulist").read_text(encoding="utf-8"))
    assert fmt.format_cpumask(cpus, 112) == (dev / "local_cpus").read_text(encoding="utf-8").strip()


def test_dgx_h100_rail_map_matches_user_guide(realdata, tmp_path):
    rail = json.loads((realdata / "topo/derived-from-issue-excerpts/dgx-h100-user-guide_gpu-nic-rail-map.json")
                      .read_text(encoding="utf-8"))
    hwsim.render("dgx-h100", tmp_path)
    gpus = topo.gpus(tmp_path)
    assert len(gpus) == 8
    for dummy_port, dummy_cx, numa, gpu, netdev, rdma in rail["rows"]:
        nic = topo.rdma_bdf(tmp_path, rdma)
        assert os.path.basename(os.path.realpath(tmp_path / "sys/class/net" / netdev / "device")) == nic
        assert topo.classify(tmp_path, gpus[gpu], nic) == "PIX"
        assert (tmp_path / "sys/bus/pci/devices" / nic / "numa_node").read_text(encoding="utf-8") == f"{numa}\n"
        assert (tmp_path / "sys/class/infiniband" / rdma / "ports/1/link_layer").read_text(encoding="utf-8") == "InfiniBand\n"
    for rdma in ("mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"):
        assert (tmp_path / "sys/class/infiniband" / rdma / "ports/1/link_layer").read_text(encoding="utf-8") == "Ethernet\n"


def test_numa_split_and_roce_distances(tmp_path):
    hwsim.render("numa-split", tmp_path / "a")
    assert topo.classify(tmp_path / "a", "0000:18:00.0", "0000:b1:00.0") == "SYS"
    hwsim.render("roce-cx6dx", tmp_path / "b")
    assert topo.classify(tmp_path / "b", "0000:21:00.0", "0000:01:00.0") == "PHB"
    assert topo.classify(tmp_path / "b", "0000:01:00.0", "0000:01:00.1") == "PIX"


@pytest.mark.parametrize("name", ["dell-xe9680-12nic", "a100-10nic"])
def test_matrix_archetypes_reproduce_their_real_nvidia_smi_matrix(realdata, tmp_path, name):
    spec = hwsim.load(name)
    labels, cells, legend = topo.parse_matrix(
        (realdata / "topo/full-matrices" / spec.source).read_text(encoding="utf-8"))
    hwsim.render(spec, tmp_path)
    gpus = topo.gpus(tmp_path)

    def bdf(label):
        return gpus[int(label[3:])] if label.startswith("GPU") else topo.rdma_bdf(tmp_path, legend[label])

    compared = 0
    for (row, col), want in cells.items():
        if want.startswith("NV"):
            continue
        assert topo.classify(tmp_path, bdf(row), bdf(col)) == want, (row, col)
        compared += 1
    assert compared >= 260 and len(labels) >= 18


@pytest.mark.parametrize("text, message", [
    ("name: x\nnuma: [{id: 0, cpus: '0-3'}]\npci: [{host_bridge: '0000:00', children: [{gpu: 0000:01:00.0}]}]\n",
     "quoted"),
    ("name: x\nnuma: [{id: 0, cpus: '0-3'}]\nbogus: 1\n", "unknown keys"),
    ("name: x\nnuma: [{id: 0, cpus: '0-3'}]\npci: [{host_bridge: '0000:00', children: [{gpu: '0000:01:00.0', model: h200}]}]\n",
     "unknown model"),
    ("name: x\nnuma: [{id: 0, cpus: '0-3'}]\npci: [{host_bridge: '0000:00', numa_node: 3}]\n", "numa_node 3"),
    ("name: x\nnuma: [{id: 0, cpus: '0-3'}]\nmodules: {loaded: [nosuch]}\n", "catalogue"),
])
def test_spec_validation_errors(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(hwsim.SpecError, match=message):
        hwsim.load(path)


def test_unknown_archetype_lists_known_ones():
    with pytest.raises(hwsim.SpecError, match="dgx-h100"):
        hwsim.load("nope")


def test_proc_cpuinfo_names_the_cpu_vendor(tmp_path):
    """/proc/cpuinfo: one block per CPU of the NUMA map; the vendor picks the IOMMU switch (intel_iommu/amd_iommu)."""
    import hwsim
    amd = (hwsim.render("a100-10nic", tmp_path / "a100") / "proc" / "cpuinfo").read_text()
    intel = (hwsim.render("no-rdma", tmp_path / "plain") / "proc" / "cpuinfo").read_text()
    assert amd.count("vendor_id\t: AuthenticAMD\n") == amd.count("processor\t: ") > 1
    assert "model name\t: AMD EPYC 7742 64-Core Processor" in amd
    assert intel.count("processor\t: ") == 16 and "vendor_id\t: GenuineIntel" in intel


def test_hwsim_cpuinfo_takes_this_machines_cpu_unless_the_spec_names_one(tmp_path, monkeypatch):
    import hwsim
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nvendor_id\t: HygonGenuine\ncpu family\t: 24\nmodel\t\t: 1\n"
                    "model name\t: Hygon C86 7185 32-core Processor\n\nprocessor\t: 1\n")
    monkeypatch.setenv("HWSIM_CPUINFO", str(fake))
    plain = (hwsim.render("no-rdma", tmp_path / "plain") / "proc" / "cpuinfo").read_text()
    assert "vendor_id\t: HygonGenuine" in plain and "Hygon C86 7185" in plain
    amd = (hwsim.render("a100-10nic", tmp_path / "a100") / "proc" / "cpuinfo").read_text()
    assert "vendor_id\t: AuthenticAMD" in amd  # the spec's own CPU wins
