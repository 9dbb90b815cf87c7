package bidengine

import (
	"context"
	"errors"
	"fmt"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
)

// Screening is what the engine would decide on a group: a bid at Price, or not,
// with the reason (one of the Reason constants) and its detail.
type Screening struct {
	Bid    bool
	Price  market.DecCoin
	Reason string
	Detail string
}

// Screen runs the decision core on a group as if an order of owner's had it (owner
// may be empty: then tenant lists are not applied): eligibility, the capacity it
// would need (Fit: nothing is reserved), and the price. The hourly bid budget is not
// spent or checked, and nothing is recorded. An error is returned only when ctx ended
// during pricing.
func (e *Engine) Screen(ctx context.Context, owner string, spec market.GroupSpec) (Screening, error) {
	e.mu.Lock()
	audits := e.audits
	policy := e.cfg.Policy
	if owner == "" {
		policy.Allow, policy.Deny = nil, nil
	}
	e.mu.Unlock()
	no := func(err error) (Screening, error) {
		var nb *NoBid
		if errors.As(err, &nb) {
			return Screening{Reason: nb.Reason, Detail: nb.Detail}, nil
		}
		return Screening{Reason: ReasonError, Detail: err.Error()}, nil
	}
	if err := policy.Eligible(owner, spec, audits); err != nil {
		return no(err)
	}
	d, err := cluster.DemandOf(spec, e.cfg.Overcommit)
	if err != nil {
		return no(noBid(ReasonInvalidOrder, "%v", err))
	}
	placements, err := e.cap.Fit(d)
	var ins *cluster.Insufficient
	switch {
	case errors.As(err, &ins):
		return no(noBid(capacityReason(ins.Resource), "%s", ins.Detail))
	case err != nil:
		return no(err)
	}
	price, err := e.price(ctx, ledger.Order{ID: market.OrderID{Owner: owner}, Spec: spec}, placements)
	if ctx.Err() != nil {
		return Screening{}, fmt.Errorf("screen group %q: %w", spec.Name, ctx.Err())
	}
	if err != nil {
		return no(err)
	}
	return Screening{Bid: true, Price: price, Reason: ReasonPriced}, nil
}
