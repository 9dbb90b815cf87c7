package cluster

import (
	"errors"
	"fmt"
	"slices"

	"berth.dev/berth/internal/market"
)

// ErrHostnameInUse reports a hostname another deployment holds: another tenant's, or
// one of the same tenant's other deployments (which can give it up with a hostname
// migration).
var ErrHostnameInUse = errors.New("hostname in use")

// ErrLeaseClosed reports a manifest for a lease that is closed or closing.
var ErrLeaseClosed = errors.New("lease closed")

// HostnameError says which hostname is in use, and whether the requesting tenant is
// the one holding it (then it may migrate it). It never names another tenant.
type HostnameError struct {
	Hostname string
	// SameOwner: the hostname belongs to another deployment of the same tenant.
	SameOwner bool
	// Holder is the lease holding it (for the tenant's own deployments only).
	Holder market.LeaseID
}

func (e *HostnameError) Error() string {
	if e.SameOwner {
		return fmt.Sprintf("hostname %q is used by your deployment %d; move it with a hostname migration", e.Hostname, e.Holder.DSeq)
	}
	return fmt.Sprintf("hostname %q is used by another tenant", e.Hostname)
}

func (e *HostnameError) Unwrap() error { return ErrHostnameInUse }

// hostIndex records which lease holds each hostname, so that one hostname routes to
// one deployment. Leases of the same deployment may pass a hostname between them (a
// manifest update can move it from one group to another). Not safe for concurrent use
// (the Manager holds its lock).
type hostIndex struct {
	byHost  map[string]market.LeaseID
	byLease map[market.LeaseID][]string
}

func newHostIndex() *hostIndex {
	return &hostIndex{byHost: map[string]market.LeaseID{}, byLease: map[market.LeaseID][]string{}}
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

// check reports the first of hosts that id may not take.
func (x *hostIndex) check(id market.LeaseID, hosts []string) error {
	for _, h := range hosts {
		holder, ok := x.byHost[h]
		if !ok || holder.Deployment() == id.Deployment() {
			continue
		}
		if holder.Owner == id.Owner {
			return &HostnameError{Hostname: h, SameOwner: true, Holder: holder}
		}
		return &HostnameError{Hostname: h}
	}
	return nil
}

// set makes hosts the lease's hostnames, releasing those it no longer lists.
func (x *hostIndex) set(id market.LeaseID, hosts []string) {
	x.release(id)
	for _, h := range hosts {
		if prev, ok := x.byHost[h]; ok && prev != id {
			x.byLease[prev] = slices.DeleteFunc(x.byLease[prev], func(s string) bool { return s == h })
		}
		x.byHost[h] = id
	}
	if len(hosts) > 0 {
		x.byLease[id] = slices.Clone(hosts)
	}
}

// release frees every hostname the lease holds.
func (x *hostIndex) release(id market.LeaseID) {
	for _, h := range x.byLease[id] {
		if x.byHost[h] == id {
			delete(x.byHost, h)
		}
	}
	delete(x.byLease, id)
}

// holder is the lease holding h.
func (x *hostIndex) holder(h string) (market.LeaseID, bool) {
	id, ok := x.byHost[h]
	return id, ok
}
