package inventory

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	berthv1 "berth.dev/berth/api/v1"
)

// Bus topics of the inventory operator (the seeds' names).
const (
	TopicCluster = "inventory.cluster"
	TopicNodes   = "inventory.nodes"
	TopicStorage = "inventory.storage"
)

// ClusterEvent is published on inventory.cluster with every report written (changes
// and heartbeats): the cluster's totals.
type ClusterEvent struct {
	At          time.Time `json:"at"`
	Inventory   string    `json:"inventory"`
	Nodes       int       `json:"nodes"`
	Schedulable int       `json:"schedulable"`
	// Allocatable and Used are over schedulable nodes.
	Allocatable corev1.ResourceList `json:"allocatable"`
	Used        corev1.ResourceList `json:"used"`
	// GPUs are the offered GPUs by "vendor/model/ram/interface".
	GPUs     map[string]int64 `json:"gpus,omitempty"`
	Problems []string         `json:"problems,omitempty"`
}

// NodeEvent is published on inventory.nodes for each node whose entry changed, or that
// went (Deleted, with only the name).
type NodeEvent struct {
	At      time.Time             `json:"at"`
	Node    berthv1.InventoryNode `json:"node"`
	Deleted bool                  `json:"deleted,omitempty"`
}

// StorageEvent is published on inventory.storage for each offered class whose entry
// changed, or that is no longer offered (Removed).
type StorageEvent struct {
	At      time.Time                `json:"at"`
	Storage berthv1.InventoryStorage `json:"storage"`
	Removed bool                     `json:"removed,omitempty"`
}

// Summary is the cluster event of a report.
func Summary(name string, st *berthv1.InventoryStatus) ClusterEvent {
	e := ClusterEvent{At: st.UpdatedAt.Time, Inventory: name, Nodes: len(st.Nodes), Allocatable: corev1.ResourceList{}, Used: corev1.ResourceList{}, Problems: st.Problems}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if !n.Schedulable {
			continue
		}
		e.Schedulable++
		addTo(e.Allocatable, n.Allocatable)
		addTo(e.Used, n.Used)
		if g := n.GPU; g != nil && g.Offered > 0 {
			if e.GPUs == nil {
				e.GPUs = map[string]int64{}
			}
			e.GPUs[g.Vendor+"/"+g.Model+"/"+g.RAM+"/"+g.Interface] += g.Offered
		}
	}
	return e
}
