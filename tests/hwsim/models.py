"""Catalogue of the PCI device models a spec can name, with the IDs the real hardware reports.

IDs come from the PCI ID database and the realdata captures (ConnectX-7 vendor_part_id 4129 = 0x1021 and its VF
4126 = 0x101e in realdata/outputs/ibv_devinfo and azure-ndv5-h200-vm; class codes from realdata/hwloc).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLASS_IB = 0x020700
CLASS_ETH = 0x020000
CLASS_3D = 0x030200
CLASS_BRIDGE = 0x060400


@dataclass(frozen=True)
class Model:
    """What a device model looks like in sysfs before any spec override."""

    vendor: int
    device: int
    klass: int
    driver: str
    subsystem_vendor: int = 0
    subsystem_device: int = 0
    vf_device: int = 0
    fw_ver: str = ""
    board_id: str = ""
    rates: dict[str, str] = field(default_factory=dict)
    description: str = ""
    mlx_name: str = ""
    vf_driver: str = ""
    vpi: bool = False
    #: the firmware capabilities behind the mlx5 hw_counters groups (HW_COUNTER_GROUPS) this model reports
    hw_counter_caps: tuple[str, ...] = ()

    @property
    def hw_counters(self) -> tuple[str, ...]:
        """The names under ``ports/<n>/hw_counters/`` (besides ``lifespan``), in mlx5_ib_fill_counters() order."""
        return tuple(name for cap in HW_COUNTER_ORDER if cap in self.hw_counter_caps for name in HW_COUNTER_GROUPS[cap])

    @property
    def hca_type(self) -> str:
        """mlx5 reports 'MT' + the PCI device id in decimal (MT4129 for ConnectX-7)."""
        return f"MT{self.device}"


#: mlx5 port hw_counters, by the capability that adds each group (drivers/infiniband/hw/mlx5/counters.c at
#: torvalds/linux 10d4de4189533840f296ce7e48eac05b985d96bc, mlx5_ib_fill_counters()): the basic Q counters always;
#: out_of_sequence with MLX5_CAP_GEN(out_of_seq_cnt); the retransmission Q counters with retransmission_q_counters;
#: the extended error Q counters with enhanced_error_q_counters; the RoCE acceleration ones with roce_accl; the
#: congestion statistics with cc_query_allowed; rx_icrc_encapsulated with the PCAM feature rx_icrc_encapsulated_counter.
#: The optional op counters (cc_rx_ce_pkts, rdma_tx_bytes ...) are set through netlink and are not in sysfs.
HW_COUNTER_GROUPS: dict[str, tuple[str, ...]] = {
    "basic": ("rx_write_requests", "rx_read_requests", "rx_atomic_requests", "rx_dct_connect", "out_of_buffer"),
    "out_of_seq_cnt": ("out_of_sequence",),
    "retransmission_q_counters": ("duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
                                  "local_ack_timeout_err"),
    "enhanced_error_q_counters": ("resp_local_length_error", "resp_cqe_error", "req_cqe_error",
                                  "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
                                  "resp_cqe_flush_error", "req_cqe_flush_error", "req_transport_retries_exceeded",
                                  "req_rnr_retries_exceeded"),
    "roce_accl": ("roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps",
                  "roce_slow_restart_trans"),
    "cc_query_allowed": ("rp_cnp_ignored", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent"),
    "rx_icrc_encapsulated_counter": ("rx_icrc_encapsulated",),
}
HW_COUNTER_ORDER = tuple(HW_COUNTER_GROUPS)
#: Q counters are 32-bit fields of QUERY_Q_COUNTER's output (be32_to_cpu): they wrap; the congestion and PPCNT ones
#: are 64-bit (``_high``/``_low`` halves, be64)
HW_COUNTER_BITS = dict((name, 64 if cap in ("cc_query_allowed", "rx_icrc_encapsulated_counter") else 32)
                       for cap, names in HW_COUNTER_GROUPS.items() for name in names)
#: [inference] the capabilities per model: every group on ConnectX-6 Dx and ConnectX-7 (RoCE acceleration -- adaptive
#: retransmission, slow restart -- and the ICRC counter came with ConnectX-6 Dx); ConnectX-6 (VPI) without those two.
#: The capabilities are per device, not per port: an InfiniBand port lists the same files as a RoCE port of the same
#: model (mlx5_ib_fill_counters() does not look at the link layer); the congestion and RoCE ones stay 0 there.
_CAPS_CX6 = ("basic", "out_of_seq_cnt", "retransmission_q_counters", "enhanced_error_q_counters", "cc_query_allowed")
_CAPS_CX6DX = _CAPS_CX6 + ("roce_accl", "rx_icrc_encapsulated_counter")

_MLX_RATES_NDR = {"InfiniBand": "400 Gb/sec (4X NDR)", "Ethernet": "400 Gb/sec (4X NDR)"}
_MLX_RATES_HDR = {"InfiniBand": "200 Gb/sec (4X HDR)", "Ethernet": "100 Gb/sec (2X HDR)"}

MODELS: dict[str, Model] = {
    "connectx-7": Model(0x15B3, 0x1021, CLASS_IB, "mlx5_core", 0x15B3, 0x0041, 0x101E, "28.41.1000", "MT_0000000838",
                        _MLX_RATES_NDR, "NVIDIA ConnectX-7 Adapter Card", "ConnectX7", vpi=True,
                        hw_counter_caps=_CAPS_CX6DX),
    "connectx-6dx": Model(0x15B3, 0x101D, CLASS_ETH, "mlx5_core", 0x15B3, 0x0016, 0x101E, "22.39.1002", "MT_0000000359",
                          _MLX_RATES_HDR, "NVIDIA ConnectX-6 Dx EN adapter card", "ConnectX6DX",
                          hw_counter_caps=_CAPS_CX6DX),
    "connectx-6": Model(0x15B3, 0x101B, CLASS_IB, "mlx5_core", 0x15B3, 0x0006, 0x101C, "20.39.1002", "MT_0000000223",
                        _MLX_RATES_HDR, "ConnectX-6 VPI adapter card", "ConnectX6", vpi=True,
                        hw_counter_caps=_CAPS_CX6),
    "intel-x710": Model(0x8086, 0x1572, CLASS_ETH, "i40e", 0x8086, 0x0000, 0x154C,
                        description="Intel Ethernet Controller X710 for 10GbE SFP+", vf_driver="iavf"),
    "h100-sxm5": Model(0x10DE, 0x2330, CLASS_3D, "nvidia", 0x10DE, 0x16C1),
    "a100-sxm4": Model(0x10DE, 0x20B2, CLASS_3D, "nvidia", 0x10DE, 0x1463),
    "l40s": Model(0x10DE, 0x26B9, CLASS_3D, "nvidia", 0x10DE, 0x1851),
    # Bridges: Intel Sapphire Rapids root port, Broadcom PEX89xxx switch ports, AMD root port.
    "intel-rootport": Model(0x8086, 0x352A, CLASS_BRIDGE, "pcieport"),
    "amd-rootport": Model(0x1022, 0x1483, CLASS_BRIDGE, "pcieport"),
    "broadcom-pex89": Model(0x1000, 0xC030, CLASS_BRIDGE, "pcieport", 0x1000, 0x100B),
    "plx-pex9797": Model(0x10B5, 0x9797, CLASS_BRIDGE, "pcieport", 0x10B5, 0x9797),
}


def driver_matches(driver: str, vendor: int, device: int) -> bool:
    """Whether a driver's ID table would match the device, as driver_match_device() decides for bind."""
    for model in MODELS.values():
        if model.vendor != vendor:
            continue
        if model.driver == driver and device == model.device:
            return True
        if model.vf_device and (model.vf_driver or model.driver) == driver and device == model.vf_device:
            return True
    return False
