package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/metallb"
)

// MetalLBPool names the MetalLB IPAddressPool leased IPs come from.
type MetalLBPool struct {
	Namespace, Name string
}

// leasedIPPool keeps the leased-IP pool of a cluster.Capacity in step with a MetalLB
// IPAddressPool: its size is the pool's, and every address of it that a LoadBalancer
// Service holds (anyone's) is used; an address one of our leases holds is covered by
// its reservation.
type leasedIPPool struct {
	cap  *cluster.Capacity
	pool MetalLBPool
	log  *slog.Logger

	mu sync.Mutex
	// spec is the pool as last read (nil: not there).
	spec *metallb.Pool
	// holders are, per address, the Services holding it and their leases (nil: not ours).
	holders map[string]map[string]*market.LeaseID
	// addrs are each Service's addresses.
	addrs map[string][]string
}

func newLeasedIPPool(capacity *cluster.Capacity, pool MetalLBPool, log *slog.Logger) *leasedIPPool {
	capacity.SetPoolCapacity(cluster.PoolLeasedIPs, 0) // until the pool is read
	return &leasedIPPool{cap: capacity, pool: pool, log: log, holders: map[string]map[string]*market.LeaseID{}, addrs: map[string][]string{}}
}

// informer makes the pool's informer (a factory the caller starts) and its handler.
func (p *leasedIPPool) informer(ctx context.Context, dc dynamic.Interface) (cache.ResourceEventHandlerRegistration, dynamicinformer.DynamicSharedInformerFactory, error) {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, p.pool.Namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + p.pool.Name
	})
	reg, err := f.ForResource(metallb.PoolResource).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.setPool(ctx, o) },
		UpdateFunc: func(_, o any) { p.setPool(ctx, o) },
		DeleteFunc: func(any) { p.setSpec(nil) },
	})
	return reg, f, err
}

func (p *leasedIPPool) setPool(ctx context.Context, o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	addrs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
	avoid, _, _ := unstructured.NestedBool(u.Object, "spec", "avoidBuggyIPs")
	spec, err := metallb.ParsePool(u.GetName(), addrs, avoid, true)
	if err != nil {
		p.log.WarnContext(ctx, "the leased IP pool cannot be read: no leased IPs are offered", slog.String("pool", p.pool.Namespace+"/"+p.pool.Name), slog.Any("error", err))
		p.setSpec(nil)
		return
	}
	p.setSpec(&spec)
}

// setSpec sets the pool's size and recounts which held addresses are in it.
func (p *leasedIPPool) setSpec(spec *metallb.Pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spec = spec
	size := int64(0)
	if spec != nil {
		size = spec.Size()
	}
	p.cap.SetPoolCapacity(cluster.PoolLeasedIPs, size)
	for a := range p.holders {
		p.updateLocked(a)
	}
}

// setService records the addresses a Service holds.
func (p *leasedIPPool) setService(v *serviceView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := v.key()
	old := p.addrs[key]
	for _, a := range old {
		delete(p.holders[a], key)
	}
	p.addrs[key] = v.lbIPs
	if len(v.lbIPs) == 0 {
		delete(p.addrs, key)
	}
	for _, a := range v.lbIPs {
		if p.holders[a] == nil {
			p.holders[a] = map[string]*market.LeaseID{}
		}
		p.holders[a][key] = v.lease
	}
	for _, a := range slices.Concat(old, v.lbIPs) {
		p.updateLocked(a)
	}
}

// deleteService forgets a Service's addresses.
func (p *leasedIPPool) deleteService(v *serviceView) {
	p.setService(&serviceView{view: v.view})
}

// updateLocked makes address a's pool item say who holds it, or removes it.
func (p *leasedIPPool) updateLocked(a string) {
	key := "ip/" + a
	h := p.holders[a]
	addr, err := netip.ParseAddr(a)
	if len(h) == 0 || err != nil || p.spec == nil || !p.spec.Contains(addr) {
		p.cap.DeletePoolItem(cluster.PoolLeasedIPs, key)
		if len(h) == 0 {
			delete(p.holders, a)
		}
		return
	}
	var lease *market.LeaseID
	for _, l := range h {
		if l != nil {
			lease = l // one of our leases holds it: its reservation covers it
			break
		}
	}
	p.cap.SetPoolItem(cluster.PoolLeasedIPs, cluster.PoolItem{Key: key, Amount: 1, Lease: lease})
}

// String names the pool for logs.
func (p MetalLBPool) String() string { return fmt.Sprintf("%s/%s", p.Namespace, p.Name) }
