// rdma-k8s-node-guidpool: sriov-network-operator's own code reads InfiniBand VF GUID pool files.
//
// Added to a copy of the operator's module tree by rdma.k8s_node's scripts/build-sriov-operator-check, as
// pkg/host/rdmak8snodeguidpool/main.go (under pkg/host, so it may import pkg/host/internal/...).  For each JSON line
// on stdin
//
//	{"id": any, "data": "<pool file bytes, base64>" (absent: no pool file),
//	 "links": [{"name": "ib0", "address": "80:00:..:01" (hex octets), "pci": "0000:3b:00.0" (absent: no device)}],
//	 "vfs": {"<PF PCI address>": <VF count>}}
//
// it builds a fresh host root (vars.InChroot, vars.FilesystemRoot) holding the bytes at the operator's own path
// (consts.InfinibandGUIDConfigFilePath) and each link's /sys/class/net/<name>/device symlink, runs the operator's
// infiniband.New() (which reads the file with newIbGUIDPool/getIbGUIDConfig) with a netlink stand-in that lists
// those links and records the GUIDs set, and the operator's network helper (which resolves a pfGuid's link to its
// PCI address through that symlink); then, for each PF of "vfs", ConfigureVfGUID for VF 0..count-1 (the operator's
// GetVFGUID, then LinkSetVfNodeGUID and LinkSetVfPortGUID).  It prints one JSON line per input line:
//
//	{"id": .., "go": "go1.26.8" (the Go it was built with: net.ParseMAC differs by version), "ok": true, "missing": false, "pools": {"<pci>": {"guids": [..]} | {"range": [start, end]}},
//	 "assigned": {"<pci>": {"node": [..], "port": [..], "error": ".."}}}
//	{"id": .., "ok": false, "error": "<the operator's error>"}
//
// GUIDs are printed as the operator prints them (GUID.String(): 8 lowercase octets with colons).
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/go-logr/logr"
	vnetlink "github.com/vishvananda/netlink"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/consts"
	"github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/host/internal/infiniband"
	netlinkLib "github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/host/internal/lib/netlink"
	"github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/host/internal/network"
	"github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/vars"
)

type linkSpec struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	PCI     string `json:"pci"`
}

type request struct {
	ID    json.RawMessage `json:"id"`
	Data  *[]byte         `json:"data"`
	Links []linkSpec      `json:"links"`
	VFs   map[string]int  `json:"vfs"`
}

type pool struct {
	GUIDs []string  `json:"guids,omitempty"`
	Range *[]string `json:"range,omitempty"`
}

type assigned struct {
	Node  []string `json:"node"`
	Port  []string `json:"port"`
	Error string   `json:"error,omitempty"`
}

type response struct {
	ID       json.RawMessage     `json:"id"`
	Go       string              `json:"go"`
	OK       bool                `json:"ok"`
	Error    string              `json:"error,omitempty"`
	Missing  bool                `json:"missing,omitempty"`
	Pools    map[string]pool     `json:"pools,omitempty"`
	Assigned map[string]assigned `json:"assigned,omitempty"`
}

// fakeNetlink lists the request's links and records the VF GUIDs the operator sets; any other call panics (the
// embedded interface is nil), which would show the operator doing more than reading the pool.
type fakeNetlink struct {
	netlinkLib.NetlinkLib
	links []netlinkLib.Link
	node  map[string][]string
	port  map[string][]string
}

func (f *fakeNetlink) LinkList() ([]netlinkLib.Link, error) { return f.links, nil }

func (f *fakeNetlink) LinkSetVfNodeGUID(link netlinkLib.Link, vf int, guid net.HardwareAddr) error {
	f.node[link.Attrs().Name] = append(f.node[link.Attrs().Name], guid.String())
	return nil
}

func (f *fakeNetlink) LinkSetVfPortGUID(link netlinkLib.Link, vf int, guid net.HardwareAddr) error {
	f.port[link.Attrs().Name] = append(f.port[link.Attrs().Name], guid.String())
	return nil
}

func hostRoot(req request) (string, []netlinkLib.Link, error) {
	root, err := os.MkdirTemp("", "rdma-k8s-node-guidpool-")
	if err != nil {
		return "", nil, err
	}
	if req.Data != nil {
		path := filepath.Join(root, consts.InfinibandGUIDConfigFilePath)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return root, nil, err
		}
		if err := os.WriteFile(path, *req.Data, 0o644); err != nil {
			return root, nil, err
		}
	}
	var links []netlinkLib.Link
	for _, spec := range req.Links {
		address, err := hex.DecodeString(strings.NewReplacer(":", "", "-", "", ".", "").Replace(spec.Address))
		if err != nil {
			return root, nil, fmt.Errorf("link %s: address %q: %w", spec.Name, spec.Address, err)
		}
		links = append(links, &vnetlink.Device{LinkAttrs: vnetlink.LinkAttrs{Name: spec.Name, HardwareAddr: address}})
		netdir := filepath.Join(root, consts.SysClassNet, spec.Name)
		if err := os.MkdirAll(netdir, 0o755); err != nil {
			return root, nil, err
		}
		if spec.PCI != "" {
			device := filepath.Join(root, consts.SysBusPciDevices, spec.PCI)
			if err := os.MkdirAll(device, 0o755); err != nil {
				return root, nil, err
			}
			if err := os.Symlink("../../../bus/pci/devices/"+spec.PCI, filepath.Join(netdir, "device")); err != nil {
				return root, nil, err
			}
		}
	}
	return root, links, nil
}

func check(req request) response {
	out := response{ID: req.ID, Go: runtime.Version()}
	root, links, err := hostRoot(req)
	if root != "" {
		defer os.RemoveAll(root)
	}
	if err != nil {
		out.Error = "rdma-k8s-node-guidpool: " + err.Error()
		return out
	}
	vars.InChroot = true // the operator then reads <FilesystemRoot>/etc/sriov-operator/infiniband/guids
	vars.FilesystemRoot = root
	nl := &fakeNetlink{links: links, node: map[string][]string{}, port: map[string][]string{}}
	ib, err := infiniband.New(nl, nil, network.New(nil, nil, nil, nil))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.OK = true
	pools, present := infiniband.RdmaK8sNodePool(ib)
	out.Missing = !present
	out.Pools = map[string]pool{}
	for pci, entry := range pools {
		var p pool
		for _, guid := range entry.GUIDs {
			p.GUIDs = append(p.GUIDs, guid.String())
		}
		if entry.Range != nil {
			p.Range = &[]string{entry.Range.Start.String(), entry.Range.End.String()}
		}
		out.Pools[pci] = p
	}
	if len(req.VFs) > 0 {
		out.Assigned = map[string]assigned{}
	}
	for pci, count := range req.VFs {
		pf := &vnetlink.Device{LinkAttrs: vnetlink.LinkAttrs{Name: "pf-" + pci}}
		got := assigned{Node: []string{}, Port: []string{}}
		for vf := 0; vf < count; vf++ {
			if err := ib.ConfigureVfGUID(fmt.Sprintf("vf%d-of-%s", vf, pci), pci, vf, pf); err != nil {
				got.Error = err.Error()
				break
			}
		}
		if node := nl.node[pf.Name]; node != nil {
			got.Node = node
		}
		if port := nl.port[pf.Name]; port != nil {
			got.Port = port
		}
		out.Assigned[pci] = got
	}
	return out
}

func main() {
	log.SetLogger(logr.Discard())
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<30)
	encoder := json.NewEncoder(os.Stdout)
	for in.Scan() {
		line := in.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			fmt.Fprintf(os.Stderr, "rdma-k8s-node-guidpool: bad request line: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(check(req)); err != nil {
			fmt.Fprintf(os.Stderr, "rdma-k8s-node-guidpool: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "rdma-k8s-node-guidpool: %v\n", err)
		os.Exit(1)
	}
}
