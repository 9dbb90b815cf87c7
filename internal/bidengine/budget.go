package bidengine

import (
	"fmt"
	"time"
)

// Budget caps how many bids we place per hour, overall and per tenant: token buckets
// holding one hour's worth, refilled continuously. Zero means no cap. Not safe for
// concurrent use (the engine owns it).
type Budget struct {
	perHour, tenantPerHour float64
	all                    bucket
	tenants                map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewBudget returns a budget of perHour bids overall and tenantPerHour per tenant.
func NewBudget(perHour, tenantPerHour uint32) *Budget {
	return &Budget{perHour: float64(perHour), tenantPerHour: float64(tenantPerHour), tenants: map[string]*bucket{}}
}

// refill brings b to now: capacity tokens at most, rate capacity per hour.
func (b *bucket) refill(capacity float64, now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = capacity, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(capacity, b.tokens+capacity*d.Hours())
		b.at = now
	}
}

// Allow says whether a bid for owner fits the budget now, without spending it.
func (g *Budget) Allow(owner string, now time.Time) error {
	if g.perHour > 0 {
		g.all.refill(g.perHour, now)
		if g.all.tokens < 1 {
			return noBid(ReasonBudget, "the budget of %g bids per hour is spent; the next bid is possible in %s", g.perHour, wait(g.all.tokens, g.perHour))
		}
	}
	if g.tenantPerHour > 0 {
		b := g.tenant(owner, now)
		if b.tokens < 1 {
			return noBid(ReasonTenantBudget, "tenant %s's budget of %g bids per hour is spent; the next bid is possible in %s", owner, g.tenantPerHour, wait(b.tokens, g.tenantPerHour))
		}
	}
	return nil
}

func wait(tokens, perHour float64) time.Duration {
	return time.Duration((1 - tokens) / perHour * float64(time.Hour)).Round(time.Second)
}

func (g *Budget) tenant(owner string, now time.Time) *bucket {
	b, ok := g.tenants[owner]
	if !ok {
		b = &bucket{}
		g.tenants[owner] = b
	}
	b.refill(g.tenantPerHour, now)
	return b
}

// Spend takes one bid for owner out of the budget (after Allow said yes).
func (g *Budget) Spend(owner string, now time.Time) {
	if g.perHour > 0 {
		g.all.refill(g.perHour, now)
		g.all.tokens--
	}
	if g.tenantPerHour > 0 {
		g.tenant(owner, now).tokens--
		// Forget full buckets so the map holds only tenants that bid this hour.
		if len(g.tenants) > 1024 {
			for k, b := range g.tenants {
				b.refill(g.tenantPerHour, now)
				if b.tokens >= g.tenantPerHour {
					delete(g.tenants, k)
				}
			}
		}
	}
}

// Refund gives back a bid Spend took for owner, when the bid did not happen after all.
func (g *Budget) Refund(owner string, now time.Time) {
	if g.perHour > 0 {
		g.all.refill(g.perHour, now)
		g.all.tokens = min(g.perHour, g.all.tokens+1)
	}
	if g.tenantPerHour > 0 {
		b := g.tenant(owner, now)
		b.tokens = min(g.tenantPerHour, b.tokens+1)
	}
}

func (g *Budget) String() string {
	return fmt.Sprintf("%g bids/hour, %g per tenant", g.perHour, g.tenantPerHour)
}
