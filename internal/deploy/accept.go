package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/api/market/v1"
)

// ErrNotRecorded reports a manifest that could not be made durable (the cluster did
// not take its record): the tenant should send it again.
var ErrNotRecorded = errors.New("the manifest could not be recorded")

// LeaseManifest is the group one lease must run.
type LeaseManifest struct {
	Lease market.LeaseID
	Group market.ManifestGroup
}

// ManifestReceived sets the manifest a lease must run (a new one, or an update); see
// ManifestsReceived.
func (m *Manager) ManifestReceived(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup) error {
	return m.ManifestsReceived(ctx, version, []LeaseManifest{{Lease: id, Group: group}})
}

// ManifestsReceived sets the manifests of several leases (a deployment's groups). It
// returns nil only once every lease's manifest is durable (Deployer.Record): a tenant
// told so can count on it surviving any stop of the provider, the next start applies
// it. It fails, recording nothing, before Run has rebuilt from the cluster
// (ErrStarting: the routes the cluster has are not known yet), when a lease is closed
// (ErrLeaseClosed), or when another tenant holds one of the groups' hostnames (a
// *HostnameError). A hostname another deployment of the same tenant holds is accepted
// but withheld: the lease gets no route for it until MigrateHostnames.
//
// When the cluster does not take a record (ErrNotRecorded), the leases recorded before
// it keep their new manifest (it passed every check and is the deployment's current
// version: the cluster converges to it) and the error asks the tenant to send the
// manifest again, which completes the rest.
//
// Manifests of one lease are accepted one at a time, and never while the lease is
// being applied, so the record and what the manager runs agree on which came last; a
// second waits for the first (or ctx).
func (m *Manager) ManifestsReceived(ctx context.Context, version []byte, leases []LeaseManifest) error {
	ids := make([]market.LeaseID, len(leases))
	for i := range leases {
		ids[i] = leases[i].Lease
	}
	if err := m.locks.lock(ctx, ids...); err != nil {
		return fmt.Errorf("another manifest for the lease is being accepted, or the lease applied: %w", err)
	}
	defer m.locks.unlock(ids...)
	routes, err := m.beginAccept(leases)
	if err != nil {
		return err
	}
	recorded := 0
	for i := range leases {
		if err = m.dep.Record(ctx, leases[i].Lease, version, leases[i].Group, routes[i]); err != nil {
			err = fmt.Errorf("lease %s: %w: %w", leases[i].Lease, ErrNotRecorded, err)
			break
		}
		recorded++
	}
	if cerr := m.endAccept(leases, version, recorded); err == nil {
		err = cerr
	}
	return err
}

// beginAccept checks the leases and their routes, and holds their hostnames for the
// tenant until endAccept. It returns the routes each lease will hold, for its record.
func (m *Manager) beginAccept(leases []LeaseManifest) ([]Routes, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.rebuilt {
		return nil, ErrStarting
	}
	routes := make([]Routes, len(leases))
	for i := range leases {
		id := leases[i].Lease
		if m.closedLocked(id) {
			return nil, fmt.Errorf("lease %s: %w", id, ErrLeaseClosed)
		}
		r := RoutesOf(&leases[i].Group)
		if err := m.routes.check(id, r); err != nil {
			return nil, fmt.Errorf("lease %s: %w", id, err)
		}
		routes[i] = m.routes.preview(id, r)
	}
	for i := range leases {
		m.routes.pend(leases[i].Lease.Owner, RoutesOf(&leases[i].Group).Hosts)
	}
	return routes, nil
}

// endAccept ends the acceptance: the first n leases, recorded, get their manifest.
// A lease closed while its record was written is torn down again (the record may
// have re-created its namespace) and reported closed.
func (m *Manager) endAccept(leases []LeaseManifest, version []byte, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var closed error
	for i := range leases {
		id := leases[i].Lease
		m.routes.unpend(id.Owner, RoutesOf(&leases[i].Group).Hosts)
		if i >= n {
			continue
		}
		if m.closedLocked(id) {
			delete(m.closed, id) // so that the teardown is queued again
			if l := m.leaseLocked(id); l != nil && !l.close {
				m.closeLocked(id)
			} else if l != nil {
				m.enqueueLocked(id)
			}
			closed = fmt.Errorf("lease %s: %w", id, ErrLeaseClosed)
			continue
		}
		if l := m.leaseLocked(id); l != nil && l.state.Version == nil {
			l.firstManifest = time.Now()
		}
		m.setManifestLocked(id, version, leases[i].Group)
	}
	return closed
}

// closedLocked reports whether the lease is closing or torn down.
func (m *Manager) closedLocked(id market.LeaseID) bool {
	if l, ok := m.leases[id]; ok && l.close {
		return true
	}
	_, ok := m.closed[id]
	return ok
}
