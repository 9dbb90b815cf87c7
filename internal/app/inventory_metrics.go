package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/internal/cluster"
)

// inventoryMetrics are the cluster inventory as bidding sees it, read from the capacity
// when scraped: the same snapshot /status shows, so the two agree. A node that takes no
// new pods (not Ready, cordoned, tainted NoSchedule or NoExecute) is counted as
// unschedulable and adds nothing to what is available.
type inventoryMetrics struct {
	capacity                        *cluster.Capacity
	nodes, cpu, memory, gpus, ephem *prometheus.Desc
}

func newInventoryMetrics(c *cluster.Capacity) *inventoryMetrics {
	return &inventoryMetrics{
		capacity: c,
		nodes: prometheus.NewDesc("berth_inventory_nodes",
			"Nodes in the inventory, by whether they take new pods (schedulable=false: not Ready, cordoned, or tainted NoSchedule/NoExecute).",
			[]string{"schedulable"}, nil),
		cpu: prometheus.NewDesc("berth_inventory_available_cpu_cores",
			"CPU left for new leases on schedulable nodes, after running pods and reservations.", nil, nil),
		memory: prometheus.NewDesc("berth_inventory_available_memory_bytes",
			"Memory left for new leases on schedulable nodes, after running pods and reservations.", nil, nil),
		gpus: prometheus.NewDesc("berth_inventory_available_gpus",
			"GPUs left for new leases on schedulable nodes, after running pods and reservations.", nil, nil),
		ephem: prometheus.NewDesc("berth_inventory_available_ephemeral_storage_bytes",
			"Ephemeral storage left for new leases on schedulable nodes, after running pods and reservations.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *inventoryMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.nodes, m.cpu, m.memory, m.gpus, m.ephem} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *inventoryMetrics) Collect(ch chan<- prometheus.Metric) {
	var schedulable, unschedulable int
	var avail cluster.Amounts
	nodes := m.capacity.Snapshot().Nodes
	for i := range nodes {
		n := &nodes[i]
		if !n.Schedulable {
			unschedulable++
			continue
		}
		schedulable++
		avail = avail.Add(n.Available)
	}
	ch <- prometheus.MustNewConstMetric(m.nodes, prometheus.GaugeValue, float64(schedulable), "true")
	ch <- prometheus.MustNewConstMetric(m.nodes, prometheus.GaugeValue, float64(unschedulable), "false")
	ch <- prometheus.MustNewConstMetric(m.cpu, prometheus.GaugeValue, float64(avail.CPU)/1000)
	ch <- prometheus.MustNewConstMetric(m.memory, prometheus.GaugeValue, float64(avail.Memory))
	ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(avail.GPUs))
	ch <- prometheus.MustNewConstMetric(m.ephem, prometheus.GaugeValue, float64(avail.EphemeralStorage))
}
