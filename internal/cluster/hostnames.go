package cluster

import (
	"errors"
	"fmt"
	"slices"

	"berth.dev/berth/internal/market"
)

// ErrHostnameInUse reports a hostname another tenant's deployment holds.
var ErrHostnameInUse = errors.New("hostname in use")

// ErrMigration reports a hostname migration that cannot be done: no such destination
// lease, or a hostname its manifest does not list.
var ErrMigration = errors.New("hostname migration refused")

// ErrLeaseClosed reports a manifest for a lease that is closed or closing.
var ErrLeaseClosed = errors.New("lease closed")

// HostnameError says which hostname another tenant holds (never which tenant).
type HostnameError struct {
	Hostname string
}

func (e *HostnameError) Error() string {
	return fmt.Sprintf("hostname %q is used by another tenant", e.Hostname)
}

func (e *HostnameError) Unwrap() error { return ErrHostnameInUse }

// hostIndex records which lease holds each hostname, so that one hostname routes to
// one deployment. A manifest may list a hostname another deployment of the same
// tenant holds: it is withheld from the new lease (no route) until the tenant
// migrates it. Leases of the same deployment pass hostnames between them freely (an
// update may move one from a group to another). Not safe for concurrent use (the
// Manager holds its lock).
type hostIndex struct {
	byHost map[string]market.LeaseID
	// wants are the hostnames each lease's manifest lists, held or withheld.
	wants map[market.LeaseID][]string
}

func newHostIndex() *hostIndex {
	return &hostIndex{byHost: map[string]market.LeaseID{}, wants: map[market.LeaseID][]string{}}
}

// groupHosts lists the hostnames a group's ports accept, each once.
func groupHosts(g *market.ManifestGroup) []string {
	var out []string
	for i := range g.Services {
		for j := range g.Services[i].Expose {
			for _, h := range g.Services[i].Expose[j].Hosts {
				if !slices.Contains(out, h) {
					out = append(out, h)
				}
			}
		}
	}
	return out
}

// check reports the first of hosts another tenant holds.
func (x *hostIndex) check(id market.LeaseID, hosts []string) error {
	for _, h := range hosts {
		if holder, ok := x.byHost[h]; ok && holder.Owner != id.Owner {
			return &HostnameError{Hostname: h}
		}
	}
	return nil
}

// set records the lease's hostnames: it takes those free or held within its
// deployment, the others stay withheld; hostnames it no longer lists are released.
func (x *hostIndex) set(id market.LeaseID, hosts []string) {
	x.release(id)
	x.wants[id] = slices.Clone(hosts)
	for _, h := range hosts {
		if holder, ok := x.byHost[h]; !ok || holder.Deployment() == id.Deployment() {
			x.byHost[h] = id
		}
	}
	if len(hosts) == 0 {
		delete(x.wants, id)
	}
}

// release frees every hostname the lease holds and forgets what it wants.
func (x *hostIndex) release(id market.LeaseID) {
	for _, h := range x.wants[id] {
		if x.byHost[h] == id {
			delete(x.byHost, h)
		}
	}
	delete(x.wants, id)
}

// holds reports whether the lease holds h.
func (x *hostIndex) holds(id market.LeaseID, h string) bool {
	holder, ok := x.byHost[h]
	return ok && holder == id
}

// holder is the lease holding h.
func (x *hostIndex) holder(h string) (market.LeaseID, bool) {
	id, ok := x.byHost[h]
	return id, ok
}

// filter returns g with only the hostnames id holds (what the cluster routes for it).
func (x *hostIndex) filter(id market.LeaseID, g market.ManifestGroup) market.ManifestGroup {
	out := g
	out.Services = slices.Clone(g.Services)
	for i := range out.Services {
		svc := &out.Services[i]
		svc.Expose = slices.Clone(svc.Expose)
		for j := range svc.Expose {
			e := &svc.Expose[j]
			if len(e.Hosts) == 0 {
				continue
			}
			var held []string
			for _, h := range e.Hosts {
				if x.holds(id, h) {
					held = append(held, h)
				}
			}
			e.Hosts = held
		}
	}
	return out
}
