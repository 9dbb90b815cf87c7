package ip

import (
	"cmp"
	"context"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"berth.dev/berth/internal/httpjson"
	"berth.dev/berth/internal/metallb"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
)

// PoolUsage is one address pool's use.
type PoolUsage struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	// Size is how many addresses it offers; Assigned how many MetalLB has handed out
	// (to anyone on the cluster), Available how many are left. Assigned and Available
	// are MetalLB's own counts (its pool status) when it reports them.
	Size      int64 `json:"size"`
	Assigned  int64 `json:"assigned"`
	Available int64 `json:"available"`
	// Error says why the pool could not be read.
	Error string `json:"error,omitempty"`
}

// AddressUsage is one leased address and the lease ports on it.
type AddressUsage struct {
	IP    string     `json:"ip"`
	Pool  string     `json:"pool,omitempty"`
	Ports []PortUsed `json:"ports"`
}

// PortUsed is one port of a lease on a leased address.
type PortUsed struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Lease     string `json:"lease"`
	Port      int32  `json:"port"`
	Protocol  string `json:"protocol"`
}

// Usage is the operator's report: its pools, and its provider's leased addresses.
type Usage struct {
	Pools []PoolUsage    `json:"pools"`
	IPs   []AddressUsage `json:"ips"`
	// Pending counts this provider's ports still without an address.
	Pending int       `json:"pending"`
	At      time.Time `json:"at"`
}

// noUsage is the report of no pools and no addresses, now.
func noUsage() Usage { return Usage{At: time.Now().UTC(), Pools: []PoolUsage{}, IPs: []AddressUsage{}} }

// Usage reads the pools and Services from the cache (nothing while not leading).
func (c *Controller) Usage(ctx context.Context) Usage {
	u := noUsage()
	if c.leading.Load() == nil {
		return u
	}
	pl := &unstructured.UnstructuredList{}
	pl.SetGroupVersionKind(metallb.PoolResource.GroupVersion().WithKind("IPAddressPoolList"))
	var sl corev1.ServiceList
	if c.client.List(ctx, pl, client.InNamespace(c.cfg.MetalLBNamespace)) != nil || c.client.List(ctx, &sl) != nil {
		return u // the cache stopped meanwhile
	}
	var pools []metallb.Pool
	for i := range pl.Items {
		pu, p := poolUsage(&pl.Items[i])
		if c.cfg.Pool != "" && pu.Name != c.cfg.Pool {
			continue
		}
		u.Pools = append(u.Pools, pu)
		if pu.Error == "" {
			pools = append(pools, p)
		}
	}
	slices.SortFunc(u.Pools, func(a, b PoolUsage) int { return cmp.Compare(a.Name, b.Name) })
	byIP := map[string]*AddressUsage{}
	for i := range sl.Items {
		s := &sl.Items[i]
		if len(s.Spec.Ports) == 0 {
			continue
		}
		ip := assignedIP(s)
		if ip == "" {
			u.Pending++
			continue
		}
		iu := byIP[ip]
		if iu == nil {
			iu = &AddressUsage{IP: ip, Pool: s.Annotations["metallb.io/ip-allocated-from-pool"]}
			if a, err := netip.ParseAddr(ip); err == nil && iu.Pool == "" {
				for _, p := range pools {
					if p.Contains(a) {
						iu.Pool = p.Name
					}
				}
			}
			byIP[ip] = iu
		}
		lease := ""
		if id, ok := ownership.LeaseFromLabels(s.Labels); ok {
			lease = id.String()
		}
		iu.Ports = append(iu.Ports, PortUsed{Namespace: s.Namespace, Service: s.Labels[labelService], Lease: lease,
			Port: s.Spec.Ports[0].Port, Protocol: string(s.Spec.Ports[0].Protocol)})
	}
	for _, iu := range byIP {
		slices.SortFunc(iu.Ports, func(a, b PortUsed) int {
			return cmp.Or(cmp.Compare(a.Lease, b.Lease), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
		})
		u.IPs = append(u.IPs, *iu)
	}
	slices.SortFunc(u.IPs, func(a, b AddressUsage) int { return cmp.Compare(a.IP, b.IP) })
	return u
}

// poolUsage reads an IPAddressPool: its size from its addresses, and MetalLB's counts
// from its status (v0.15 and later) when there.
func poolUsage(obj *unstructured.Unstructured) (PoolUsage, metallb.Pool) {
	pu := PoolUsage{Name: obj.GetName()}
	addrs, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "addresses")
	avoid, _, _ := unstructured.NestedBool(obj.Object, "spec", "avoidBuggyIPs")
	auto, found, _ := unstructured.NestedBool(obj.Object, "spec", "autoAssign")
	pu.Addresses = addrs
	p, err := metallb.ParsePool(pu.Name, addrs, avoid, auto || !found)
	if err != nil {
		pu.Error = err.Error()
		return pu, p
	}
	pu.Size = p.Size()
	a4, ok4, _ := unstructured.NestedInt64(obj.Object, "status", "assignedIPv4")
	a6, ok6, _ := unstructured.NestedInt64(obj.Object, "status", "assignedIPv6")
	v4, _, _ := unstructured.NestedInt64(obj.Object, "status", "availableIPv4")
	v6, _, _ := unstructured.NestedInt64(obj.Object, "status", "availableIPv6")
	if ok4 || ok6 {
		pu.Assigned, pu.Available = a4+a6, v4+v6
	} else {
		pu.Available = pu.Size
	}
	return pu, p
}

// Metrics are the IP operator's Prometheus metrics.
type Metrics struct {
	*operator.ReconcileMetrics
	usage func() Usage
}

// NewMetrics registers the metrics with reg (nil: not registered), the pool gauges
// read from the controller at each scrape.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{ReconcileMetrics: operator.NewReconcileMetrics("ip", "Leased IP", "service", "LoadBalancer Service", "apply, delete")}
	if reg != nil {
		reg.MustRegister(append(m.Collectors(), usageCollector{m})...)
	}
	return m
}

var (
	poolDesc = prometheus.NewDesc("berth_ip_pool_addresses", "Addresses of a MetalLB pool by state (size, assigned, available).",
		[]string{"pool", "state"}, nil)
	leasedDesc  = prometheus.NewDesc("berth_ip_leased_addresses", "Addresses this provider's leases hold.", nil, nil)
	pendingDesc = prometheus.NewDesc("berth_ip_pending_ports", "This provider's leased-IP ports without an address.", nil, nil)
)

// usageCollector reports the usage at scrape time.
type usageCollector struct{ m *Metrics }

func (u usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolDesc
	ch <- leasedDesc
	ch <- pendingDesc
}

func (u usageCollector) Collect(ch chan<- prometheus.Metric) {
	if u.m.usage == nil {
		return
	}
	us := u.m.usage()
	for _, p := range us.Pools {
		for state, v := range map[string]int64{"size": p.Size, "assigned": p.Assigned, "available": p.Available} {
			ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(v), p.Name, state)
		}
	}
	ch <- prometheus.MustNewConstMetric(leasedDesc, prometheus.GaugeValue, float64(len(us.IPs)))
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(us.Pending))
}

// UsageHandler serves GET /usage: the pools' use and this provider's leased addresses
// with the lease ports on each, as JSON.
func (c *Controller) UsageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		if c.leading.Load() == nil {
			code = http.StatusServiceUnavailable // a standby, or not synced yet
		}
		httpjson.Write(w, code, c.Usage(r.Context()))
	})
}
