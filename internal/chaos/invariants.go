package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/wait"
)

// converge checks the invariants until they all hold, up to cfg.Converge: it returns
// how long that took, and what still did not hold at the end (broken promises).
// Providers that exited on their own since the last check are broken promises at once.
func (w *world) converge(ctx context.Context, cfg Config) (time.Duration, []string) {
	start := time.Now()
	var problems []string
	for _, name := range providerNames {
		problems = append(problems, w.providers[name].takeCrashes()...)
	}
	problems = append(problems, w.ledger.takeCrashes()...)
	deadline := start.Add(cfg.Converge)
	var last []string
	for {
		last = w.check(ctx)
		if len(last) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if !wait.Sleep(ctx, 250*time.Millisecond) {
			break
		}
	}
	took := time.Since(start)
	if len(last) > 0 {
		for _, p := range last {
			problems = append(problems, fmt.Sprintf("not converged after %s: %s", cfg.Converge, p))
		}
	}
	return took, problems
}

// check is one look at every invariant; it returns what does not hold.
func (w *world) check(ctx context.Context) []string {
	var out []string
	active := map[string]bool{} // lease namespaces of active leases
	for _, name := range providerNames {
		p := w.providers[name]
		leases, err := w.leases(ctx, p.addr, "")
		if err != nil {
			return []string{fmt.Sprintf("ledger: %v", err)}
		}
		activeN := 0
		for i := range leases {
			l := &leases[i].Lease
			switch {
			case l.State == ledger.LeaseActive:
				activeN++
				active[kube.LeaseNamespace(l.ID)] = true
			case l.Reason != ledger.ReasonOwner:
				// No lease here is closed but by its tenant.
				out = append(out, fmt.Sprintf("healthy lease closed: provider %s's lease %s is %s with reason %s", name, l.ID, l.State, l.Reason))
			}
		}
		bids, err := w.openBids(ctx, p.addr)
		if err != nil {
			return []string{fmt.Sprintf("ledger: %v", err)}
		}
		st, err := p.status(ctx)
		if err != nil {
			out = append(out, fmt.Sprintf("provider %s does not answer: %v", name, err))
			continue
		}
		if st.Berth.ReservationsActive != activeN || st.Berth.ReservationsPending != bids {
			out = append(out, fmt.Sprintf("reservations: provider %s holds %d active and %d pending; the ledger shows %d active leases and %d open bids",
				name, st.Berth.ReservationsActive, st.Berth.ReservationsPending, activeN, bids))
		}
	}
	// No lease namespace outlives its lease.
	list, err := w.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: ownership.LabelManaged + "=true"})
	if err != nil {
		return append(out, fmt.Sprintf("cluster: %v", err))
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp == nil && !active[ns.Name] {
			out = append(out, fmt.Sprintf("leaked namespace %s (%s): its lease is not active", ns.Name, ownership.Describe(ns.Labels)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// leases lists a provider's leases in a state ("" for all).
func (w *world) leases(ctx context.Context, provider, state string) ([]ledger.LeaseResponse, error) {
	var out []ledger.LeaseResponse
	req := ledger.LeasesRequest{Provider: provider, State: state}
	err := ledger.List(ctx, w.client, ledger.QueryLeases, req, func(r ledger.LeasesResponse) error {
		out = append(out, r.Leases...)
		return nil
	})
	return out, err
}

// openBids counts a provider's open bids.
func (w *world) openBids(ctx context.Context, provider string) (int, error) {
	n := 0
	req := ledger.BidsRequest{Provider: provider, State: ledger.BidOpen}
	err := ledger.List(ctx, w.client, ledger.QueryBids, req, func(r ledger.BidsResponse) error {
		n += len(r.Bids)
		return nil
	})
	return n, err
}
