package inventory

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// Where a storage class's capacity comes from.
const (
	// SourceCSI: the CSI driver's CSIStorageCapacity objects (free space per topology
	// segment), plus what the class's bound claims hold.
	SourceCSI = "csi"
	// SourceLocal: node-local volumes (local-path and the like): a configured size,
	// per node or in all, against the bound claims.
	SourceLocal = "local"
	// SourceCeph: a configured pool size, or the Rook CephCluster's reported free
	// space divided by the pool's replicas, plus what the bound claims hold.
	SourceCeph = "ceph"
)

// StorageClass is one storage class the operator offers (the storage list of its
// configuration): only classes listed are offered.
type StorageClass struct {
	// Class is the cluster's StorageClass name.
	Class  string `yaml:"class"`
	Source string `yaml:"source"`
	// Size is the class's size (local, ceph): a quantity, "2Ti".
	Size string `yaml:"size"`
	// SizePerNode is each schedulable node's share (local), instead of Size.
	SizePerNode string `yaml:"size_per_node"`
	// CephCluster, NAMESPACE/NAME, is the Rook CephCluster whose reported capacity
	// sizes the class (ceph, when Size is empty); Replicas the pool's replica count
	// (default 3) the raw free space is divided by.
	CephCluster string `yaml:"ceph_cluster"`
	Replicas    int64  `yaml:"replicas"`
}

// Validate checks the entry; the error names its key (where is "storage[i]").
func (s StorageClass) Validate(where string) error {
	if len(validation.IsDNS1123Subdomain(s.Class)) > 0 {
		return fmt.Errorf("%s.class %q: not a StorageClass name", where, s.Class)
	}
	if len(validation.IsQualifiedName(StorageLabel(s.Class))) > 0 {
		return fmt.Errorf("%s.class %q: too long for the node label %s<class> (at most %d characters)", where, s.Class, StorageLabel(""), 63-len(strings.TrimPrefix(StorageLabel(""), "berth.dev/")))
	}
	size := func(key, v string) error {
		if v == "" {
			return nil
		}
		n, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("%s.%s %q: %w", where, key, v, err)
		}
		if n <= 0 {
			return fmt.Errorf("%s.%s %q: want a positive quantity such as 2Ti", where, key, v)
		}
		return nil
	}
	if err := size("size", s.Size); err != nil {
		return err
	}
	if err := size("size_per_node", s.SizePerNode); err != nil {
		return err
	}
	switch s.Source {
	case SourceCSI:
		if s.Size != "" || s.SizePerNode != "" || s.CephCluster != "" {
			return fmt.Errorf("%s: source csi takes its size from the driver's CSIStorageCapacity objects: remove size, size_per_node and ceph_cluster", where)
		}
	case SourceLocal:
		if (s.Size == "") == (s.SizePerNode == "") {
			return fmt.Errorf("%s: source local needs size or size_per_node (one of them)", where)
		}
		if s.CephCluster != "" {
			return fmt.Errorf("%s.ceph_cluster: only for source ceph", where)
		}
	case SourceCeph:
		if s.SizePerNode != "" {
			return fmt.Errorf("%s.size_per_node: only for source local", where)
		}
		if (s.Size == "") == (s.CephCluster == "") {
			return fmt.Errorf("%s: source ceph needs size or ceph_cluster (one of them)", where)
		}
		if s.CephCluster != "" {
			ns, name, ok := strings.Cut(s.CephCluster, "/")
			if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
				return fmt.Errorf("%s.ceph_cluster %q: want NAMESPACE/NAME", where, s.CephCluster)
			}
		}
		if s.Replicas < 0 || s.Replicas > 10 {
			return fmt.Errorf("%s.replicas %d: want 1 to 10", where, s.Replicas)
		}
	default:
		return fmt.Errorf("%s.source %q: want csi, local or ceph", where, s.Source)
	}
	return nil
}

// Claim is a bound persistent volume claim: its class, its size (the bound volume's
// capacity) and, when it is a lease's, whose.
type Claim struct {
	Class string
	Size  int64
	Owner *ownership.Owner
}

// CSICapacity is one CSIStorageCapacity object: free bytes of a class in a topology
// segment; Nodes are the nodes of the segment.
type CSICapacity struct {
	Class    string
	Capacity int64
	Nodes    []string
}

// CephCapacity is what a Rook CephCluster reports (raw bytes, before replication).
type CephCapacity struct {
	Available int64
	Reported  bool
}

// StorageInput is what the cluster tells of storage.
type StorageInput struct {
	Claims []Claim
	CSI    []CSICapacity
	// Ceph by "namespace/name" of the CephCluster.
	Ceph map[string]CephCapacity
	// Schedulable are the nodes that take workloads.
	Schedulable []string
}

// Storage computes the report of one offered class, and the nodes whose pods can use
// its volumes.
func Storage(sc StorageClass, in StorageInput) (berthv1.InventoryStorage, []string) {
	out := berthv1.InventoryStorage{Class: sc.Class, Source: sc.Source}
	var used int64
	byOwner := map[ownership.Owner]int64{}
	for _, c := range in.Claims {
		if c.Class != sc.Class {
			continue
		}
		used = satAdd(used, max(c.Size, 0))
		if c.Owner != nil {
			byOwner[*c.Owner] = satAdd(byOwner[*c.Owner], max(c.Size, 0))
		}
	}
	var capacity int64
	nodes := in.Schedulable
	var why []string
	switch sc.Source {
	case SourceCSI:
		var free int64
		seen := map[string]bool{}
		found := false
		schedulable := map[string]bool{}
		for _, n := range in.Schedulable {
			schedulable[n] = true
		}
		for _, c := range in.CSI {
			if c.Class != sc.Class {
				continue
			}
			found = true
			// Free space only schedulable nodes reach is not offered: a cordoned or
			// NotReady segment's is not there for new leases.
			if !slices.ContainsFunc(c.Nodes, func(n string) bool { return schedulable[n] }) {
				continue
			}
			free = satAdd(free, max(c.Capacity, 0))
			for _, n := range c.Nodes {
				seen[n] = true
			}
		}
		nodes = slices.DeleteFunc(slices.Clone(in.Schedulable), func(n string) bool { return !seen[n] })
		capacity = satAdd(free, used)
		if !found {
			capacity = used
			why = append(why, fmt.Sprintf("no CSIStorageCapacity object reports class %s: does its driver publish capacity (CSIDriver storageCapacity: true)?", sc.Class))
		}
	case SourceLocal:
		if sc.Size != "" {
			capacity = mustQuantity(sc.Size)
		} else {
			per, n := mustQuantity(sc.SizePerNode), int64(len(in.Schedulable))
			capacity = per * n
			if n > 0 && per > math.MaxInt64/n {
				capacity = math.MaxInt64
			}
		}
	case SourceCeph:
		if sc.Size != "" {
			capacity = mustQuantity(sc.Size)
			break
		}
		replicas := sc.Replicas
		if replicas == 0 {
			replicas = 3
		}
		c, ok := in.Ceph[sc.CephCluster]
		switch {
		case !ok:
			capacity = used
			why = append(why, fmt.Sprintf("CephCluster %s not found", sc.CephCluster))
		case !c.Reported:
			capacity = used
			why = append(why, fmt.Sprintf("CephCluster %s reports no capacity yet", sc.CephCluster))
		default:
			capacity = satAdd(max(c.Available, 0)/replicas, used)
		}
	}
	if used > capacity {
		why = append(why, fmt.Sprintf("bound claims hold %s, more than the class's size %s", qty(used), qty(capacity)))
	}
	out.Capacity = *resource.NewQuantity(capacity, resource.BinarySI)
	out.Used = *resource.NewQuantity(used, resource.BinarySI)
	for o, n := range byOwner {
		out.Leases = append(out.Leases, berthv1.InventoryOwnerStorage{Provider: o.Provider, ChainID: o.ChainID, Used: *resource.NewQuantity(n, resource.BinarySI)})
	}
	slices.SortFunc(out.Leases, func(a, b berthv1.InventoryOwnerStorage) int {
		return strings.Compare(a.Provider+"/"+a.ChainID, b.Provider+"/"+b.ChainID)
	})
	out.Message = strings.Join(why, "; ")
	return out, nodes
}

// satAdd adds two sizes of 0 or more, stopping at the largest int64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxSize is the largest size a class may be configured with: 1 EiB.
const maxSize = 1 << 60

// parseSize reads a size of at most 1Ei. Exponents are bounded before the quantity is
// evaluated: 1E71107110 is a valid quantity that takes seconds to compare.
func parseSize(v string) (int64, error) {
	if i := strings.IndexAny(v, "eE"); len(v) > 24 || i >= 0 && (len(v)-i > 3 || strings.ContainsAny(v[i+1:], "+-")) {
		return 0, errors.New("more than 1Ei")
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, errors.New("want a positive quantity such as 2Ti")
	}
	if q.Sign() <= 0 {
		return 0, nil
	}
	if q.CmpInt64(maxSize) > 0 {
		return 0, errors.New("more than 1Ei")
	}
	n := q.Value()
	if n <= 0 {
		return 0, errors.New("more than 1Ei")
	}
	return n, nil
}

func mustQuantity(s string) int64 {
	n, err := parseSize(s)
	if err != nil {
		return 0 // Validate refused it already
	}
	return n
}

func qty(n int64) string {
	q := resource.NewQuantity(n, resource.BinarySI)
	return q.String()
}
