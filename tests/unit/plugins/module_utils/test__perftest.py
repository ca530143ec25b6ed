"""perftest and NCCL output parsing and the GID index choice, on real output (upstream issues and the VM run)."""

import pathlib
import time

import pytest

from ansible_collections.rdma.k8s_node.plugins.module_utils import _perftest

OUT = pathlib.Path(__file__).parent / "perftest_outputs"


def read(name):
    return (OUT / name).read_text()


def test_report_gbits_result_row_and_header_fields():
    parsed = _perftest.parse_perftest(read("upstream-issue273-postlist.txt"))
    assert (parsed["bytes"], parsed["iterations"]) == (8, 224958464)
    assert (parsed["peak_gbps"], parsed["avg_gbps"], parsed["msg_rate_mpps"]) == (0.0, 0.48, 7.498617)
    assert parsed["fields"]["gid_index"] == "2" and parsed["fields"]["link_type"] == "Ethernet"
    assert parsed["fields"]["device"] == "ib0" and parsed["fields"]["mtu"] == "4096[B]"
    assert parsed["errors"] == []


def test_all_sizes_run_keeps_the_largest_size():
    parsed = _perftest.parse_perftest(read("upstream-issue132-all-sizes.txt"))
    assert parsed["bytes"] == 8 and parsed["avg_gbps"] == 0.17
    assert parsed["fields"]["link_type"] == "IB" and parsed["fields"]["mtu"] == "4096[B]"


def test_megabytes_are_converted_to_gigabits():
    text = (" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            " 1024       1000             0.00               1476.74             1.512181\n")
    assert _perftest.parse_perftest(text)["avg_gbps"] == round(1476.74 * 8 * 1048576 / 1e9, 4)


def test_no_server_is_an_error_without_result():
    parsed = _perftest.parse_perftest(read("upstream-pr228-no-server.txt"))
    assert parsed["avg_gbps"] is None
    assert parsed["errors"][0] == "Couldn't connect to 192.168.125.211:18515"


def test_vm_zero_iterations_is_a_result_of_zero():
    parsed = _perftest.parse_perftest(read("vm-rxe-netns-zero.txt"))
    assert parsed["avg_gbps"] == 0.0 and parsed["iterations"] == 0
    assert parsed["fields"]["device"] == "rxea"


def test_vm_rtr_failure_lines():
    parsed = _perftest.parse_perftest(read("vm-rxe-same-netns-rtr.txt"))
    assert parsed["avg_gbps"] is None
    assert parsed["errors"] == ["Failed to modify QP 17 to RTR", "Unable to Connect the HCA's through the link"]


# GID tables as the VM's rxe over a veth showed them (index 0 link-local, 1 IPv4-mapped, 2 empty)
VETH = [("0", "fe80:0000:0000:0000:94f7:03ff:fedd:6111", "RoCE v2", "va"),
        ("1", "0000:0000:0000:0000:0000:ffff:c0a8:4d01", "RoCE v2", "va"),
        ("2", "0000:0000:0000:0000:0000:0000:0000:0000", None, None)]


def test_gid_table_drops_empty_entries_and_reads_the_ipv4_address():
    table = _perftest.gid_table(VETH)
    assert [e["index"] for e in table] == [0, 1]
    assert table[1]["ipv4"] == "192.168.77.1" and table[0]["ipv4"] is None


def test_the_roce_v2_ipv4_entry_is_chosen():
    assert _perftest.choose_gid_index(_perftest.gid_table(VETH), "Ethernet") == (1, None)


def test_a_fixed_link_local_index_is_refused_with_the_right_one_named():
    index, problem = _perftest.choose_gid_index(_perftest.gid_table(VETH), "Ethernet", wanted=0)
    assert index == 0
    assert "not the RoCE v2 IPv4 entry" in problem and "index 1 (192.168.77.1)" in problem


def test_an_empty_fixed_index_and_no_ipv4():
    assert "empty" in _perftest.choose_gid_index(_perftest.gid_table(VETH), "Ethernet", wanted=5)[1]
    assert _perftest.choose_gid_index(_perftest.gid_table(VETH[:1]), "Ethernet")[0] is None


def test_infiniband_needs_no_gid_index():
    assert _perftest.choose_gid_index([], "InfiniBand") == (None, None)


# SDR/DDR/QDR: the kernel prints the signalling rate, 8b/10b leaves 80 % for data; FDR10 and later are data rates
@pytest.mark.parametrize("rate, gbps", [("200 Gb/sec (4X HDR)", 200.0), ("2.5 Gb/sec (1X SDR)", 2.0),
                                        ("20 Gb/sec (4X DDR)", 16.0), ("40 Gb/sec (4X QDR)", 32.0),
                                        ("56 Gb/sec (4X FDR)", 56.0),
                                        ("10 Gb/sec (1X FDR10)", 10.0), ("", None), (None, None)])
def test_rate(rate, gbps):
    assert _perftest.rate_gbps(rate) == gbps


def test_command_lines():
    argv = _perftest.client_argv("ib_write_bw", "mlx5_0", 1, 18516, "192.0.2.2", gid_index=3, duration=5, rdma_cm=True)
    assert argv == ["ib_write_bw", "-d", "mlx5_0", "-i", "1", "-p", "18516", "-s", "65536", "-q", "1", "-F",
                    "--report_gbits", "-R", "-x", "3", "-D", "5", "192.0.2.2"]
    assert "-n" in _perftest.server_argv("ib_write_bw", "mlx5_0", 1, 18515, iterations=100)
    bound = _perftest.server_argv("ib_write_bw", "mlx5_0", 1, 18515, rdma_cm=True, bind_source_ip="192.0.2.1")
    assert bound[bound.index("-R") + 1:bound.index("-R") + 3] == ["--bind_source_ip", "192.0.2.1"]
    # without rdma_cm, -d picks the device and perftest's TCP exchange needs no binding
    assert "--bind_source_ip" not in _perftest.server_argv("ib_write_bw", "mlx5_0", 1, 18515,
                                                           bind_source_ip="192.0.2.1")


def test_nccl_gdrdma_everywhere_passes():
    parsed = _perftest.parse_nccl(read("nccl-upstream-issue707-gdrdma.txt"))
    # 12 IB channel lines, 6 of them [receive] (judged), every one with GDRDMA
    assert parsed["verdict"] == "pass" and parsed["net_ib"] == 12 and parsed["gdrdma"] == 6 and not parsed["notes"]


def test_nccl_ib_without_gdrdma_fails():
    parsed = _perftest.parse_nccl(read("nccl-upstream-mesh56-no-gdr.txt"))
    assert parsed["verdict"] == "fail" and parsed["cause"].startswith("no GDRDMA: 4 of 4")


def test_nccl_ib_plugin_without_gdrdma_fails():
    parsed = _perftest.parse_nccl(read("nccl-upstream-issue1814-ibext.txt"))
    assert parsed["net_ib"] == 3 and parsed["verdict"] == "fail"


def test_nccl_without_network_channels_fails():
    parsed = _perftest.parse_nccl(read("nccl-upstream-issue1538-p2p-only.txt"))
    assert parsed["verdict"] == "fail" and parsed["p2p_or_shm"] == 2 and "no network channel" in parsed["cause"]


def test_nccl_socket_fallback_and_bus_bandwidth():
    text = ("host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
            "# Avg bus bandwidth    : 1.234 \n")
    parsed = _perftest.parse_nccl(text)
    assert parsed["verdict"] == "fail" and "sockets" in parsed["cause"] and parsed["avg_busbw_gbytes"] == 1.234


def test_vm_cpu_clock_calibration_failure_is_recognised():
    parsed = _perftest.parse_perftest(read("vm-rxe-loopback-unstable.txt"))
    assert parsed["avg_gbps"] == 0.0 and parsed["iterations"] == 176 and parsed["r_squared"] == 0.442587
    assert parsed["fields"]["exchange"] == "rdma_cm" and parsed["errors"] == []


def test_vm_passing_run():
    parsed = _perftest.parse_perftest(read("vm-rxe-loopback-pass.txt"))
    assert parsed["iterations"] == 1000 and parsed["bytes"] == 65536 and parsed["avg_gbps"] > 0
    assert parsed["r_squared"] is None and parsed["errors"] == []
    assert parsed["fields"]["gid_index"] == "1" and parsed["fields"]["device"] == "rxe0"


def test_nccl_gdrdma_with_pci_and_shared_suffixes_passes():
    parsed = _perftest.parse_nccl(read("nccl-format-gdrdma-suffixes.txt"))
    assert parsed["verdict"] == "pass" and parsed["gdrdma"] == 3 and parsed["nranks"] == 4
    names = ("NET/IB/0/GDRDMA(PCI)", "NET/IB/1/GDRDMA/Shared", "NET/IB/0", "NET/IB/1(0)/GDRDMA(PCI)/Shared",
             "NET/IB/0/GDRDMAX")
    assert [_perftest.is_gdrdma(t) for t in names] == [True, True, False, True, False]


def test_nccl_send_side_without_gdr_is_a_note_on_pcie_nodes():
    parsed = _perftest.parse_nccl(read("nccl-format-pcie-send-without-gdr.txt"))
    assert parsed["verdict"] == "pass" and "send side without GDRDMA on 2 channels (NET/IB/0)" in parsed["notes"][0]


def test_nccl_receive_without_gdrdma_still_fails():
    text = read("nccl-format-pcie-send-without-gdr.txt").replace("[receive] via NET/IB/0/GDRDMA",
                                                                 "[receive] via NET/IB/0")
    parsed = _perftest.parse_nccl(text)
    assert parsed["verdict"] == "fail" and parsed["cause"].startswith("no GDRDMA: 2 of 2 receiving")


def test_nccl_single_rank_says_why_there_is_no_transport():
    parsed = _perftest.parse_nccl(read("nccl-format-one-rank.txt"))
    assert parsed["verdict"] == "fail" and parsed["nranks"] == 1 and "single rank" in parsed["cause"]


# -- found by the fuzz suite (tests/unit/fuzz/test_perftest.py) ----------------------------------------------------
def test_long_lines_are_read_in_linear_time():
    """The header-field regex backtracked quadratically on a long run of blanks (34,000 characters: over 10 s), the
    NCCL channel search rescanned the rest of the line for every "NCCL INFO Channel" without a later "via"."""
    start = time.monotonic()
    assert _perftest.parse_perftest("a" + " " * 200_000 + "a")["fields"] == {}
    assert _perftest.parse_perftest(" Device" + " " * 200_000 + ": mlx5_0")["fields"] == {"device": "mlx5_0"}
    assert _perftest.parse_nccl("NCCL INFO Channel 0 :" * 10_000)["transports"] == {}
    assert _perftest.parse_nccl("NCCL INFO Channel 0 :" * 10_000 + " via NET/IB/0/GDRDMA")["transports"] == {"NET/IB/0/GDRDMA": 1}
    assert time.monotonic() - start < 3


def test_ipv4_of_a_gid_with_an_oversize_group():
    """A 5,000-digit hex group made "%d" raise ValueError (int max str digits); the kernel prints 4 digits."""
    assert _perftest.ipv4_of_gid("0000:0000:0000:0000:0000:ffff:" + "f" * 5000 + ":0001") is None
    assert _perftest.ipv4_of_gid("0000:0000:0000:0000:0000:ffff:0a00:0001") == "10.0.0.1"


def test_counts_int_refuses_are_no_result_and_no_nranks():
    """5,000-digit byte counts and nranks raised ValueError (int max str digits)."""
    out = _perftest.parse_perftest(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                                   " 65536  " + "1" * 5000 + "  1.0  1.0  0.5\n")
    assert out["bytes"] is None and out["avg_gbps"] is None
    assert _perftest.parse_nccl("NCCL INFO comm 0x5 rank 0 nranks " + "1" * 5000)["nranks"] is None


# -- GPU memory (issue 19): real --use_cuda outputs ------------------------------------------------------------------
def test_cuda_dmabuf_run_on_h200_is_parsed():
    parsed = _perftest.parse_perftest(read("perftest-cuda-dranet-h200-dmabuf.txt"))
    assert parsed["avg_gbps"] == 140.40 and parsed["bytes"] == 8388608 and parsed["errors"] == []
    cuda = parsed["cuda"]
    assert cuda["devices"] == {0: "8F:00"} and cuda["picked"] == 0 and cuda["picked_pci"] == "8F:00"
    assert cuda["name"] == "NVIDIA H200" and cuda["integrated"] is False and cuda["dmabuf"] is True


def test_cuda_rdma_cm_run_with_sixteen_qps():
    parsed = _perftest.parse_perftest(read("perftest-cuda-gpu-tools-a40-rdma-cm.txt"))
    assert parsed["avg_gbps"] == 181.46 and parsed["fields"]["qps"] == "16" and parsed["errors"] == []
    # --use_cuda_dmabuf was given, but this build registered with cuMemAlloc's pointer: no DMA-BUF line
    assert parsed["cuda"]["picked_pci"] == "E1:00" and parsed["cuda"]["dmabuf"] is False
    assert parsed["cuda"]["name"] == "NVIDIA A40"


def test_cuda_device_list_of_four_gpus_and_the_picked_one():
    cuda = _perftest.parse_cuda(read("perftest-cuda-upstream-issue241-four-gpus.txt"))
    assert cuda["devices"] == {0: "17:00", 1: "65:00", 2: "CA:00", 3: "E3:00"}
    assert cuda["picked"] == 0 and cuda["picked_pci"] == "17:00" and cuda["integrated"] is None


def test_host_memory_run_has_no_cuda():
    assert _perftest.parse_perftest(read("vm-rxe-loopback-pass.txt"))["cuda"] is None


def test_cuda_bus_id_lookup_lines():
    text = ("Got PCIe address of: 0000:1b:00.0\ninitializing CUDA\nFinding PCIe BUS 0000:1b:00.0\nPicking GPU number 2\n"
            "initializing CUDA\nListing all CUDA devices in system:\nCUDA device 2: PCIe address is 1B:00\n\n"
            "Picking device No. 2\n")
    cuda = _perftest.parse_cuda(text)
    assert cuda["bus_id"] == "0000:1b:00.0" and cuda["picked_pci"] == "1B:00"
    assert _perftest.pci_bus_device("0000:1b:00.0") == "1B:00"


def test_cuda_command_lines_put_dmabuf_after_the_device():
    argv = _perftest.client_argv("ib_write_bw", "mlx5_0", 1, 18516, "192.0.2.2", cuda_bus_id="0000:1b:00.0",
                                 cuda_dmabuf=True)
    assert argv[-3:] == ["--use_cuda_bus_id=0000:1b:00.0", "--use_cuda_dmabuf", "192.0.2.2"]
    assert _perftest.cuda_args(cuda_index=3) == ["--use_cuda=3"]
    assert _perftest.cuda_args(cuda_dmabuf=True) == []


def test_help_options():
    text = ("      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing\n"
            "      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device, based on its full PCIe address\n")
    assert _perftest.help_options(text) == {"bind_source_ip": False, "cuda": True, "cuda_bus_id": True,
                                            "cuda_dmabuf": False}
    assert not any(_perftest.help_options("").values())


# -- NCCL (issue 19): init lines, NCCL's own reason for disabling GDR, transports with blanks --------------------------
def test_nccl_gdr_disabled_is_named_in_the_cause():
    parsed = _perftest.parse_nccl(read("nccl-upstream-issue899-no-module.txt"))
    assert parsed["verdict"] == "fail" and parsed["gdr_disabled"] == [
        "HCA 1 'mlx5_1' (no module)", "HCA 2 'mlx5_2' (no module)", "HCA 3 'mlx5_3' (no module)"]
    assert "no GDRDMA: 8 of 8 receiving" in parsed["cause"]
    assert "NCCL: GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)" in parsed["cause"]


def test_nccl_gdr_disabled_current_form_and_init_start():
    parsed = _perftest.parse_nccl(read("nccl-upstream-issue1537-gdr-disabled.txt"))
    assert parsed["gdr_disabled"] == ["HCA 0 'mlx5_0'", "HCA 1 'mlx5_1'"] and parsed["nranks"] == 16
    assert parsed["verdict"] == "fail" and "no network channel" in parsed["cause"]


@pytest.mark.parametrize("name, nranks", [("nccl-upstream-tests252-initrank.txt", 8),
                                          ("nccl-upstream-issue1814-init-complete.txt", 64)])
def test_nccl_init_lines_with_and_without_the_function(name, nranks):
    assert _perftest.parse_nccl(read(name))["nranks"] == nranks


def test_nccl_transport_names_with_blanks():
    parsed = _perftest.parse_nccl(read("nccl-upstream-awsofi715-libfabric-shared.txt"))
    assert parsed["transports"] == {"NET/AWS Libfabric/1(2)/GDRDMA/Shared": 1, "NET/AWS Libfabric/1/GDRDMA/Shared": 2,
                                    "NET/AWS Libfabric/2(4)/GDRDMA/Shared": 2, "NET/AWS Libfabric/0/GDRDMA/Shared": 1}
    assert parsed["verdict"] == "pass" and parsed["gdrdma"] == 3 and parsed["net_ib"] == 0
    mixed = _perftest.parse_nccl(read("nccl-upstream-issue527-libfabric-p2p.txt"))
    assert mixed["transports"]["P2P/IPC/read"] == 7 and mixed["p2p_or_shm"] == 7
    assert mixed["transports"]["NET/AWS Libfabric/0/GDRDMA"] == 5 and mixed["verdict"] == "pass"
    pointer = _perftest.parse_nccl("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer/read\n")
    assert pointer["transports"] == {"P2P/direct pointer/read": 1}


@pytest.mark.parametrize("rates, rails, ranks, fraction, expected", [
    ([400.0] * 8, 8, 8, 0.8, 40.0),      # one 400G rail per GPU: B = 50 GB/s per rank
    ([200.0, 200.0], 2, 8, 0.8, 5.0),    # 8 GPUs share 2 rails: B = 2 x 200 / 8 Gb/s per rank
    ([100.0, 200.0], 2, 2, 0.7, 8.75),   # the slowest rail counts
    ([], 2, 2, 0.8, None), ([100.0], 0, 2, 0.8, None)])
def test_expected_busbw(rates, rails, ranks, fraction, expected):
    assert _perftest.expected_busbw(rates, rails, ranks, fraction) == expected
