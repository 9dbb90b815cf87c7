package inventory

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/operator"
)

// Metrics are the inventory operator's Prometheus metrics: its writes (reports and
// node labels), and gauges of the last report written.
type Metrics struct {
	*operator.ReconcileMetrics
	reg    prometheus.Registerer
	report func() *berthv1.InventoryStatus

	mu   sync.Mutex
	last time.Time
}

// NewMetrics registers the metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{ReconcileMetrics: operator.NewReconcileMetrics("inventory_operator", "Inventory report", "object", "Inventory report and node label", "report: the Inventory, label: a node's labels"), reg: reg}
	if reg != nil {
		reg.MustRegister(m.Collectors()...)
		reg.MustRegister(reportCollector{m})
	}
	return m
}

func (m *Metrics) published(st *berthv1.InventoryStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = st.UpdatedAt.Time
}

var (
	nodesDesc = prometheus.NewDesc("berth_inventory_operator_nodes", "Nodes of the last report by state (schedulable, unschedulable).", []string{"state"}, nil)
	resDesc   = prometheus.NewDesc("berth_inventory_operator_resource", "Resources of schedulable nodes in the last report, by resource (cpu in cores, memory and ephemeral-storage in bytes, nvidia.com/gpu, pods) and state (allocatable, used).",
		[]string{"resource", "state"}, nil)
	gpuDesc = prometheus.NewDesc("berth_inventory_operator_gpus", "GPUs of schedulable nodes in the last report by vendor, model, memory, interface and state (offered, not_offered).",
		[]string{"vendor", "model", "ram", "interface", "state"}, nil)
	storageDesc = prometheus.NewDesc("berth_inventory_operator_storage_bytes", "Offered storage classes in the last report by state (capacity, used).", []string{"class", "state"}, nil)
	problemDesc = prometheus.NewDesc("berth_inventory_operator_problems", "Problems in the last report (unknown GPUs, classes without capacity, …).", nil, nil)
	lastDesc    = prometheus.NewDesc("berth_inventory_operator_last_report_timestamp_seconds", "When the last report was written (Unix time).", nil, nil)
)

type reportCollector struct{ m *Metrics }

func (r reportCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodesDesc, resDesc, gpuDesc, storageDesc, problemDesc, lastDesc} {
		ch <- d
	}
}

func (r reportCollector) Collect(ch chan<- prometheus.Metric) {
	if r.m.report == nil {
		return
	}
	st := r.m.report()
	if st == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	sum := inventory.Summary("", st)
	gauge(nodesDesc, float64(sum.Schedulable), "schedulable")
	gauge(nodesDesc, float64(sum.Nodes-sum.Schedulable), "unschedulable")
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, inventory.ResourceGPU, corev1.ResourcePods} {
		a, u := sum.Allocatable[name], sum.Used[name]
		gauge(resDesc, a.AsApproximateFloat64(), string(name), "allocatable")
		gauge(resDesc, u.AsApproximateFloat64(), string(name), "used")
	}
	type key struct{ vendor, model, ram, iface, state string }
	gpus := map[key]int64{}
	for i := range st.Nodes {
		g := st.Nodes[i].GPU
		if g == nil || !st.Nodes[i].Schedulable {
			continue
		}
		gpus[key{g.Vendor, g.Model, g.RAM, g.Interface, "offered"}] += g.Offered
		gpus[key{g.Vendor, g.Model, g.RAM, g.Interface, "not_offered"}] += g.Devices - g.Offered
	}
	for k, v := range gpus {
		gauge(gpuDesc, float64(v), k.vendor, k.model, k.ram, k.iface, k.state)
	}
	for i := range st.Storage {
		s := &st.Storage[i]
		gauge(storageDesc, s.Capacity.AsApproximateFloat64(), s.Class, "capacity")
		gauge(storageDesc, s.Used.AsApproximateFloat64(), s.Class, "used")
	}
	gauge(problemDesc, float64(len(st.Problems)))
	r.m.mu.Lock()
	last := r.m.last
	r.m.mu.Unlock()
	gauge(lastDesc, float64(last.UnixNano())/1e9)
}
