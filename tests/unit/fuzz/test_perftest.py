"""Fuzz _perftest: perftest's output, NCCL's INFO log, the GID table and the port rate never raise, in linear time
(log lines of 200,000 characters), and what they report is consistent (a pass means every judged channel is GDRDMA)."""

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rdma.k8s_node.plugins.module_utils import _perftest as pt
from unit.fuzz.strategies import HUGE_NUMBERS, huge, long_line, node_text, odd_text, typed_only

NUM = st.one_of(st.integers(0, 10 ** 6).map(str), st.floats(allow_nan=False, allow_infinity=False, min_value=0).map(
    lambda f: "%.2f" % f), st.sampled_from(list(HUGE_NUMBERS) + ["\u0663", "-1", "+2.5"]))
PERF_LINE = st.one_of(
    st.sampled_from([" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
                     " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
                     "---------------------------------------------------------------------------------------",
                     " Device         : mlx5_0", " Link type       : IB", " GID index\t\t: 3", " Mtu             : 4096[B]",
                     " Number of qps   : 1\t\tTransport type : IB", " Correlation coefficient r^2: 0.5 < 0.9",
                     " Couldn't connect to 10.0.0.1:18515", "Unable to init the socket connection", "ERROR: x",
                     " local address: LID 0x01 QPN 0x0123 PSN 0x4a", " remote address: LID 0x02", "***", ""]),
    st.tuples(NUM, NUM, NUM, NUM, NUM).map(lambda t: " %s    %s   %s   %s   %s" % t),
    st.tuples(st.text("ABCabc .*_/-", min_size=1, max_size=12), st.sampled_from([":", " : ", ":\t"]), odd_text(4)).map(
        "".join),
)
NCCL_LINE = st.one_of(
    st.tuples(st.sampled_from(["node1:1:2 [0] ", ""]), st.sampled_from(["NCCL INFO Channel 00/0 : ", "NCCL INFO Channel 01 : ",
                                                                       "NCCL INFO Channel x : "]),
              st.sampled_from(["0[0] -> 1[0] ", "1[1] -> 0[0] "]), st.sampled_from(["[send] ", "[receive] ", ""]),
              st.sampled_from(["via NET/IB/0/GDRDMA", "via NET/IB/1", "via NET/Socket/0", "via P2P/IPC",
                               "via NET/IBext_v8/2/GDRDMA(PCI)/Shared", "via SHM/direct/direct", "via ", "via NET/"])
              ).map("".join),
    st.tuples(st.just("NCCL INFO comm 0x5 rank 0 nranks "), NUM, st.sampled_from([" cudaDev 0", ""])).map("".join),
    st.tuples(st.just("# Avg bus bandwidth    : "), NUM).map("".join),
    st.tuples(st.just("NCCL WARN "), odd_text(5)).map("".join),
)
PERF = node_text(PERF_LINE, ("#bytes", " ", "\t", ":", "a", "Device : "))
NCCL = node_text(NCCL_LINE, ("NCCL INFO Channel 0 :", " via ", "via ", "NCCL INFO comm x rank 1 nranks ", "#", " "))


@given(st.one_of(PERF, st.none()))
def test_perftest_output_never_raises(text):
    out = typed_only(pt.parse_perftest, text)
    assert set(out) >= {"fields", "bytes", "peak_gbps", "avg_gbps", "errors"}
    assert (out["bytes"] is None) == (out["avg_gbps"] is None)


@given(st.one_of(NCCL, st.none()))
def test_nccl_log_never_raises_and_pass_means_gdrdma(text):
    out = typed_only(pt.parse_nccl, text)
    assert out["verdict"] in ("pass", "fail") and (out["verdict"] == "pass") == (out["cause"] is None)
    if out["verdict"] == "pass":
        assert out["net_ib"] > 0 and out["socket"] == 0 and out["gdrdma"] > 0


GID = st.one_of(st.sampled_from([pt.ZERO_GID, "0000:0000:0000:0000:0000:ffff:0a00:0001", "fe80:0000:0000:0000:0002:c903:00f9:bfa1",
                                 "0000:0000:0000:0000:0000:ffff:zzzz:0001", "0000:0000:0000:0000:0000:ffff: 0x1:+1",
                                 "0000:0000:0000:0000:0000:ffff:" + "f" * 5000 + ":1"]), odd_text(4), st.none())
# the index is a sysfs file name the caller filtered with isdigit(), or a number: unique per port
ENTRY = st.tuples(st.one_of(st.integers(0, 300), st.integers(0, 300).map(str)), GID, st.one_of(st.sampled_from([pt.ROCE_V2, "IB/RoCE v1", None]), odd_text(3)),
                  st.one_of(st.sampled_from(["eth0", None]), odd_text(3)))


@given(st.lists(ENTRY, max_size=6, unique_by=lambda e: int(e[0])), st.sampled_from(["Ethernet", "InfiniBand", None]),
       st.one_of(st.none(), st.integers(-1, 300)))  # gid_index: the module's option of type int
def test_gid_table_and_index_choice(entries, link_layer, wanted):
    table = typed_only(pt.gid_table, entries)
    if not isinstance(table, list):
        return
    index, problem = typed_only(pt.choose_gid_index, table, link_layer, wanted)
    if link_layer == "Ethernet" and wanted is None and problem is None:
        chosen = [e for e in table if e["index"] == index][0]
        assert chosen["type"] == pt.ROCE_V2 and chosen["ipv4"]


@given(st.one_of(st.tuples(NUM, st.sampled_from([" Gb/sec (4X HDR)", " Gb/sec (4X QDR)", "Gb/sec", " Gb/s"])).map("".join),
                 odd_text(5), st.none()))
def test_rate_never_raises(rate):
    value = typed_only(pt.rate_gbps, rate)
    assert value is None or isinstance(value, float)


@huge()
@given(st.one_of(long_line(("a", " ", ":", "\t", "Device", "#bytes "), 20_000, 200_000),
                 long_line(("NCCL INFO Channel 0 :", " ", "via ", "[send] ", "NCCL INFO comm x ", "x", "#"), 20_000, 200_000)))
def test_huge_lines_are_linear(text):
    typed_only(pt.parse_perftest, text)
    typed_only(pt.parse_nccl, text)
