// Added to a copy of sriov-network-operator's module tree by rdma.k8s_node's scripts/build-sriov-operator-check, as
// pkg/host/internal/infiniband/zz_rdma_k8s_node_export.go; not part of the operator.  The operator's GUID pool
// (what its own New() read from the pool file through newIbGUIDPool and getIbGUIDConfig) is unexported: this file
// only copies it out, so that cmd's check program (inside the module, so it may import this internal package)
// can print it.  Nothing here parses or checks anything.

package infiniband

import "github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/host/types"

// RdmaK8sNodePoolEntry is one PF's entry of the operator's pool: a GUID list or a range.
type RdmaK8sNodePoolEntry struct {
	GUIDs []GUID
	Range *GUIDRange
}

// RdmaK8sNodePool returns the pool New() built, by PF PCI address, and false when New() runs without a pool (no
// pool file: the operator then gives VFs random GUIDs).
func RdmaK8sNodePool(ib types.InfinibandInterface) (map[string]RdmaK8sNodePoolEntry, bool) {
	impl, ok := ib.(*infiniband)
	if !ok || impl.guidPool == nil {
		return nil, false
	}
	pool := impl.guidPool.(*ibGUIDPoolImpl)
	out := make(map[string]RdmaK8sNodePoolEntry, len(pool.guidConfigs))
	for pci, config := range pool.guidConfigs {
		out[pci] = RdmaK8sNodePoolEntry{GUIDs: config.GUIDs, Range: config.GUIDRange}
	}
	return out, true
}
