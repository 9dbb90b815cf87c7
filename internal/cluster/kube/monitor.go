package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
)

// eventsKept is how many recent events a lease's status holds.
const eventsKept = 10

// Monitor watches the lease namespaces of its owner (provider and chain) through
// informers (no polling) and keeps each lease's status up to date, calling OnChange with each new status. Status reads are
// from memory.
type Monitor struct {
	cache    *Cache
	cs       kubernetes.Interface
	owner    ownership.Owner
	log      *slog.Logger
	onChange func(deploy.LeaseStatus)

	// The informers' stores, indexed by namespace; they hold views (views.go).
	deployments, statefulSets, pods, services cache.Indexer
	// withHosts has the monitor watch ProviderHosts and ProviderLeasedIPs too.
	withHosts        bool
	hosts, leasedIPs cache.Indexer

	mu       sync.Mutex
	statuses map[market.LeaseID]deploy.LeaseStatus
	events   map[market.LeaseID][]deploy.Event
	leaseOf  map[string]market.LeaseID // namespace → lease, for events (which carry no labels)
	synced   chan struct{}
}

// NewMonitor returns a monitor reading c (whose owner's leases it follows); cs
// records the events of OOM kills. onChange (may be nil) is called with each changed
// status, in order, from the informers' goroutines, and must not block.
func NewMonitor(c *Cache, cs kubernetes.Interface, log *slog.Logger, onChange func(deploy.LeaseStatus)) (*Monitor, error) {
	if c == nil || cs == nil || log == nil {
		return nil, errors.New("monitor: cache, client and logger are required")
	}
	return &Monitor{cache: c, cs: cs, owner: c.owner, log: log, onChange: onChange, statuses: map[market.LeaseID]deploy.LeaseStatus{},
		events: map[market.LeaseID][]deploy.Event{}, leaseOf: map[string]market.LeaseID{}, synced: make(chan struct{})}, nil
}

// WithHosts has the monitor also watch the leases' ProviderHosts and
// ProviderLeasedIPs (berth's CRDs must be installed), so that lease statuses report
// how their hostnames and leased IPs are routed. Call it before Run.
func (m *Monitor) WithHosts() *Monitor {
	m.withHosts = true
	return m
}

// Synced is closed once the caches are filled.
func (m *Monitor) Synced() <-chan struct{} { return m.synced }

// Counts reports how many leases are ready and how many are not.
func (m *Monitor) Counts() (ready, notReady int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.statuses {
		s := m.statuses[id]
		if len(s.Services) == 0 {
			continue
		}
		if s.Ready {
			ready++
		} else {
			notReady++
		}
	}
	return ready, notReady
}

// HostPhases counts the leases' hostnames by phase ("pending" before the hostname
// operator reports one).
func (m *Monitor) HostPhases() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for id := range m.statuses {
		for _, h := range m.statuses[id].Hosts {
			out[cmp.Or(h.Phase, "pending")]++
		}
	}
	return out
}

// Status returns a lease's last computed status.
func (m *Monitor) Status(id market.LeaseID) (deploy.LeaseStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.statuses[id]
	return s, ok
}

// Run watches until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	dep, sts := m.cache.Informer(&appsv1.Deployment{}), m.cache.Informer(&appsv1.StatefulSet{})
	pod, svc := m.cache.Informer(&corev1.Pod{}), m.cache.Informer(&corev1.Service{})
	m.deployments, m.statefulSets = dep.GetIndexer(), sts.GetIndexer()
	m.pods, m.services = pod.GetIndexer(), svc.GetIndexer()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.touch(o) },
		UpdateFunc: func(_, o any) { m.touch(o) },
		DeleteFunc: func(o any) { m.touch(tombstone(o)) },
	}
	var hs Handlers
	defer hs.Remove()
	for _, inf := range []cache.SharedIndexInformer{dep, sts, pod, svc} {
		if err := hs.Add(inf, handler); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	// Containers killed at their memory limit: recorded as events of their leases.
	oom := newOOMRecorder(m.cs, m.owner, m.log)
	if err := hs.Add(pod, cache.ResourceEventHandlerFuncs{
		AddFunc:    oom.observe,
		UpdateFunc: func(_, o any) { oom.observe(o) },
	}); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	oomCtx, stopOOM := context.WithCancel(ctx)
	oomDone := make(chan struct{})
	go func() {
		defer close(oomDone)
		oom.run(oomCtx)
	}()
	defer func() {
		stopOOM()
		<-oomDone
	}()
	if m.withHosts {
		// The leases' routes: ProviderHosts and ProviderLeasedIPs, with the operators'
		// reports.
		for _, r := range []struct {
			gvr   schema.GroupVersionResource
			store *cache.Indexer
		}{{berthv1.ProviderHostResource, &m.hosts}, {berthv1.ProviderLeasedIPResource, &m.leasedIPs}} {
			inf, err := m.cache.Resource(r.gvr)
			if err != nil {
				return fmt.Errorf("monitor: %w", err)
			}
			*r.store = inf.GetIndexer()
			if err := hs.Add(inf, handler); err != nil {
				return fmt.Errorf("monitor: %w", err)
			}
		}
	}
	// Events carry no labels: all are watched, and those in lease namespaces kept.
	if err := hs.Add(m.cache.Informer(&corev1.Event{}), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.event(o) },
		UpdateFunc: func(_, o any) { m.event(o) },
	}); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	if !m.cache.Wait(ctx, &hs) {
		return nil // ctx ended
	}
	close(m.synced)
	<-ctx.Done()
	return nil
}

// event records a Kubernetes event in its lease's recent events.
func (m *Monitor) event(o any) {
	v, ok := o.(*eventView)
	if !ok || v.event == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.leaseOf[v.Namespace]
	if !ok {
		return
	}
	m.events[id] = append(m.events[id], *v.event)
	if n := len(m.events[id]); n > eventsKept {
		m.events[id] = slices.Clone(m.events[id][n-eventsKept:])
	}
	list := m.events[id]
	if s, ok := m.statuses[id]; ok {
		s.Events = slices.Clone(list)
		m.statuses[id] = s
		if m.onChange != nil {
			m.onChange(s)
		}
	}
}

// touch recomputes the status of the lease an object belongs to.
func (m *Monitor) touch(o any) {
	obj, ok := o.(interface{ leaseOf() (market.LeaseID, bool) })
	if !ok {
		return
	}
	id, ok := obj.leaseOf()
	if !ok {
		return
	}
	// One lease at a time: informers call from several goroutines, and an older
	// computation must not overwrite a newer one, nor be announced after it.
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.compute(id)
	prev, had := m.statuses[id]
	if len(s.Services) == 0 {
		delete(m.statuses, id)
		delete(m.events, id)
		delete(m.leaseOf, LeaseNamespace(id))
	} else {
		m.leaseOf[LeaseNamespace(id)] = id
		s.Events = slices.Clone(m.events[id])
		m.statuses[id] = s
	}
	if m.onChange != nil && (!had || !sameStatus(prev, s)) {
		m.onChange(s)
	}
}

func sameStatus(a, b deploy.LeaseStatus) bool {
	return a.Ready == b.Ready && slices.Equal(a.Hosts, b.Hosts) && slices.Equal(a.IPs, b.IPs) && slices.EqualFunc(a.Services, b.Services, func(x, y deploy.ServiceStatus) bool {
		return x.Name == y.Name && x.Total == y.Total && x.Available == y.Available && x.Ready == y.Ready &&
			slices.Equal(x.Forwarded, y.Forwarded) && slices.Equal(x.Errors, y.Errors) &&
			x.Restarts == y.Restarts && sameExit(x.LastExit, y.LastExit)
	})
}

func sameExit(a, b *deploy.ContainerExit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Pod == b.Pod && a.Container == b.Container && a.Reason == b.Reason && a.ExitCode == b.ExitCode && a.Time.Equal(b.Time)
}

// compute builds a lease's status from the caches.
func (m *Monitor) compute(id market.LeaseID) deploy.LeaseStatus {
	ns := LeaseNamespace(id)
	byName := map[string]*deploy.ServiceStatus{}
	get := func(name string) *deploy.ServiceStatus {
		s, ok := byName[name]
		if !ok {
			s = &deploy.ServiceStatus{Name: name}
			byName[name] = s
		}
		return s
	}
	for _, store := range []cache.Indexer{m.deployments, m.statefulSets} {
		for _, o := range byNamespace(store, ns) {
			if w, ok := o.(*workloadView); ok && w.lease != nil {
				s := get(w.service)
				s.Total, s.Available, s.Ready = w.total, w.available, w.ready
				s.Replicas, s.Updated, s.ObservedGeneration = w.replicas, w.updated, w.observedGeneration
				s.Errors = append(s.Errors, w.errors...)
			}
		}
	}
	var hosts []deploy.HostStatus
	if m.hosts != nil {

		for _, o := range byNamespace(m.hosts, ns) {
			if h, ok := o.(*hostView); ok && h.lease != nil {
				hosts = append(hosts, h.status)
			}
		}
		slices.SortFunc(hosts, func(a, b deploy.HostStatus) int { return cmp.Compare(a.Hostname, b.Hostname) })
	}
	var ips []deploy.LeasedIPStatus
	if m.leasedIPs != nil {
		for _, o := range byNamespace(m.leasedIPs, ns) {
			if v, ok := o.(*leasedIPView); ok && v.lease != nil {
				ips = append(ips, v.status)
			}
		}
		slices.SortFunc(ips, func(a, b deploy.LeasedIPStatus) int {
			return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ExternalPort, b.ExternalPort), cmp.Compare(a.Protocol, b.Protocol))
		})
	}
	var pods []*podView
	for _, o := range byNamespace(m.pods, ns) {
		if p, ok := o.(*podView); ok && p.lease != nil {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *podView) int { return b.created.Compare(a.created) })
	for _, p := range pods {
		s, ok := byName[p.service]
		if !ok {
			continue
		}
		for _, e := range p.errors {
			if !slices.Contains(s.Errors, e) {
				s.Errors = append(s.Errors, e)
			}
		}
		s.Restarts += p.restarts
		for i := range p.exits {
			if e := p.exits[i].ContainerExit; s.LastExit == nil || e.Time.After(s.LastExit.Time) {
				s.LastExit = &e
			}
		}
	}
	for _, o := range byNamespace(m.services, ns) {
		sv, ok := o.(*serviceView)
		if !ok || sv.lease == nil || !sv.nodePorts {
			continue
		}
		s, ok := byName[sv.service]
		if !ok {
			continue
		}
		for _, p := range sv.ports {
			if p.nodePort != 0 {
				s.Forwarded = append(s.Forwarded, deploy.ForwardedPort{Port: p.port, ExternalPort: p.nodePort, Proto: string(p.proto), Name: s.Name})
			}
		}
	}
	out := deploy.LeaseStatus{Lease: id, Ready: len(byName) > 0, UpdatedAt: time.Now(), Hosts: hosts, IPs: ips}
	for _, s := range byName {
		slices.SortFunc(s.Forwarded, func(a, b deploy.ForwardedPort) int { return int(a.Port) - int(b.Port) })
		out.Services = append(out.Services, *s)
		if s.Available < s.Total || s.Total == 0 {
			out.Ready = false
		}
	}
	slices.SortFunc(out.Services, func(a, b deploy.ServiceStatus) int {
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// byNamespace lists a store's objects in one namespace.
func byNamespace(store cache.Indexer, ns string) []any {
	out, err := store.ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return nil // the store has a namespace index: informers are built with one
	}
	return out
}

func (v *view) leaseOf() (market.LeaseID, bool) {
	if v.lease == nil {
		return market.LeaseID{}, false
	}
	return *v.lease, true
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// deploymentErrors: a replica set the controller could not fill (admission refused its
// pods, quota) shows as the ReplicaFailure condition.
func deploymentErrors(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			out = append(out, c.Reason+": "+c.Message)
		}
	}
	return out
}

// podErrors: why a pod is not running — not schedulable, or a container waiting for a
// reason other than starting.
func podErrors(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			out = append(out, c.Reason+": "+c.Message)
		}
	}
	for i := range p.Status.ContainerStatuses {
		if w := p.Status.ContainerStatuses[i].State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			out = append(out, w.Reason+": "+w.Message)
		}
	}
	return out
}
