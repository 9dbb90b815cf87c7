package deploy

import (
	"context"
	"slices"
	"strings"
	"sync"

	"berth.dev/berth/api/market/v1"
)

// leaseLocks serialize what writes a lease's record: a manifest being accepted (its
// record written, then taken in memory) and a sync applying the lease (which writes
// the record too, from memory). Without it a sync that read the older manifest could
// write it over the newer record a tenant was just told was durable. Waiting for a
// lock ends with ctx.
type leaseLocks struct {
	mu    sync.Mutex
	locks map[market.LeaseID]*leaseLock
}

type leaseLock struct {
	held chan struct{} // one slot: full while held
	refs int
}

func newLeaseLocks() *leaseLocks { return &leaseLocks{locks: map[market.LeaseID]*leaseLock{}} }

// lock takes the leases' locks, in a fixed order (so that two callers with common
// leases cannot deadlock); on an error none is held.
func (k *leaseLocks) lock(ctx context.Context, ids ...market.LeaseID) error {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b market.LeaseID) int { return strings.Compare(a.String(), b.String()) })
	ids = slices.Compact(ids)
	for i, id := range ids {
		k.mu.Lock()
		l := k.locks[id]
		if l == nil {
			l = &leaseLock{held: make(chan struct{}, 1)}
			k.locks[id] = l
		}
		l.refs++
		k.mu.Unlock()
		select {
		case l.held <- struct{}{}:
		case <-ctx.Done():
			k.release(id, false)
			k.unlock(ids[:i]...)
			return ctx.Err()
		}
	}
	return nil
}

// unlock releases the leases' locks.
func (k *leaseLocks) unlock(ids ...market.LeaseID) {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b market.LeaseID) int { return strings.Compare(a.String(), b.String()) })
	for _, id := range slices.Compact(ids) {
		k.release(id, true)
	}
}

func (k *leaseLocks) release(id market.LeaseID, held bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.locks[id]
	if held {
		<-l.held
	}
	l.refs--
	if l.refs == 0 {
		delete(k.locks, id)
	}
}
