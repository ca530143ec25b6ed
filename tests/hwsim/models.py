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

    @property
    def hca_type(self) -> str:
        """mlx5 reports 'MT' + the PCI device id in decimal (MT4129 for ConnectX-7)."""
        return f"MT{self.device}"


_MLX_RATES_NDR = {"InfiniBand": "400 Gb/sec (4X NDR)", "Ethernet": "400 Gb/sec (4X NDR)"}
_MLX_RATES_HDR = {"InfiniBand": "200 Gb/sec (4X HDR)", "Ethernet": "100 Gb/sec (2X HDR)"}

MODELS: dict[str, Model] = {
    "connectx-7": Model(0x15B3, 0x1021, CLASS_IB, "mlx5_core", 0x15B3, 0x0041, 0x101E, "28.41.1000", "MT_0000000838",
                        _MLX_RATES_NDR, "NVIDIA ConnectX-7 Adapter Card", "ConnectX7", vpi=True),
    "connectx-6dx": Model(0x15B3, 0x101D, CLASS_ETH, "mlx5_core", 0x15B3, 0x0016, 0x101E, "22.39.1002", "MT_0000000359",
                          _MLX_RATES_HDR, "NVIDIA ConnectX-6 Dx EN adapter card", "ConnectX6DX"),
    "connectx-6": Model(0x15B3, 0x101B, CLASS_IB, "mlx5_core", 0x15B3, 0x0006, 0x101C, "20.39.1002", "MT_0000000223",
                        _MLX_RATES_HDR, "ConnectX-6 VPI adapter card", "ConnectX6", vpi=True),
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
