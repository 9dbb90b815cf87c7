package bidengine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// Reasons for not bidding that pricing gives. They are metric label values: a fixed set.
const (
	ReasonDenom            = "price_denom"         // the order is priced in a denomination we do not price in
	ReasonStorageClass     = "storage_class_price" // no rate for a storage class the order uses
	ReasonGPUModel         = "gpu_model_price"     // no rate for the reserved GPU model and no "*" rate
	ReasonPriceAboveMax    = "price_above_order"   // our price exceeds what the tenant pays
	ReasonPriceNotPositive = "price_not_positive"  // our price is zero (the ledger needs a positive bid)
	ReasonPriceOverflow    = "price_out_of_range"  // the computed price does not fit a bid
	ReasonScriptFailed     = "price_script_failed" // the pricing script did not start, exited non-zero or timed out
	ReasonScriptOutput     = "price_script_output" // the pricing script printed no price, or not a decimal
)

// Pricer prices a Request: our price per block for the whole group, in the order's
// denomination, or a *NoBid error saying why not to bid. Other errors are failures to
// decide (the caller's ctx ended), not decisions.
type Pricer interface {
	Price(ctx context.Context, r Request) (market.DecCoin, error)
}

// ScalePricer is the scale strategy as a Pricer. It never blocks, so it ignores ctx.
type ScalePricer struct {
	Rates ScaleRates
}

var _ Pricer = (*ScalePricer)(nil)

// Price is Rates.Price.
func (p *ScalePricer) Price(_ context.Context, r Request) (market.DecCoin, error) {
	return p.Rates.Price(r)
}

// NoBid is a decision not to bid, with the reason (one of the Reason constants) and a
// sentence saying what exactly.
type NoBid struct {
	Reason string
	Detail string
}

func (e *NoBid) Error() string { return "no bid (" + e.Reason + "): " + e.Detail }

func noBid(reason, format string, args ...any) error {
	return &NoBid{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// mib is the number of bytes in a MiB.
const mib = 1 << 20

// ScaleRates price each resource at a fixed rate per block, in one denomination, with
// exact decimals (18 places, truncated). An order priced in another denomination is
// priced by converting at the configured rate: Exchange[d] is how many units of d one
// unit of Denom is worth (with Denom uakt and AKT at 1.25 USD, uact is 1.25: ACT is
// pegged to the US dollar). A denomination with no rate gets no bid.
type ScaleRates struct {
	Denom    string
	Exchange map[string]market.Dec
	// CPU is per millicpu; Memory per MiB; Storage per MiB by class (ephemeral, ram,
	// or a persistent class); Endpoint per global port; LeasedIP per distinct leased
	// IP; GPU per GPU by model, "*" for models without their own rate.
	CPU      market.Dec
	Memory   market.Dec
	Storage  map[string]market.Dec
	Endpoint market.Dec
	LeasedIP market.Dec
	GPU      map[string]market.Dec
}

// Validate reports the first invalid rate, named as in the configuration.
func (s *ScaleRates) Validate() error {
	if !market.ValidDenom(s.Denom) {
		return fmt.Errorf("pricing.scale.denom %q: not a valid denomination", s.Denom)
	}
	for name, d := range map[string]market.Dec{"cpu": s.CPU, "memory": s.Memory, "endpoint": s.Endpoint, "leased_ip": s.LeasedIP} {
		if d.Sign() < 0 {
			return fmt.Errorf("pricing.scale.%s %s: negative", name, d)
		}
	}
	for _, d := range sortedKeys(s.Exchange) {
		switch {
		case !market.ValidDenom(d):
			return fmt.Errorf("pricing.scale.exchange: %q is not a valid denomination", d)
		case d == s.Denom && s.Exchange[d].Cmp(market.NewDec(1)) != 0:
			return fmt.Errorf("pricing.scale.exchange.%s %s: the rates are in %s, so its rate can only be 1", d, s.Exchange[d], d)
		case s.Exchange[d].Sign() <= 0:
			return fmt.Errorf("pricing.scale.exchange.%s %s: must be positive", d, s.Exchange[d])
		}
	}
	for _, m := range []struct {
		field string
		rates map[string]market.Dec
	}{{"storage", s.Storage}, {"gpu", s.GPU}} {
		for _, k := range sortedKeys(m.rates) {
			if strings.TrimSpace(k) == "" {
				return fmt.Errorf("pricing.scale.%s: empty key", m.field)
			}
			if m.rates[k].Sign() < 0 {
				return fmt.Errorf("pricing.scale.%s.%s %s: negative", m.field, k, m.rates[k])
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]market.Dec) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// gpuRate is the rate of a GPU model: its own (case-insensitive), else "*".
func (s *ScaleRates) gpuRate(model string) (market.Dec, bool) {
	for k, v := range s.GPU {
		if strings.EqualFold(k, model) {
			return v, true
		}
	}
	v, ok := s.GPU["*"]
	return v, ok
}

// Price is the scale strategy's price per block for the whole group, checked against
// the order's price: a *NoBid error says why not to bid.
func (s *ScaleRates) Price(r Request) (market.DecCoin, error) {
	rate, convert := s.Exchange[r.MaxPrice.Denom]
	convert = convert && r.MaxPrice.Denom != s.Denom
	if r.MaxPrice.Denom != s.Denom && !convert {
		return market.DecCoin{}, noBid(ReasonDenom, "the order is priced in %q; we price in %q and have no exchange rate for %q (pricing.scale.exchange)",
			r.MaxPrice.Denom, s.Denom, r.MaxPrice.Denom)
	}
	total := market.Dec{}
	for i := range r.Units {
		u := &r.Units[i]
		unit := s.CPU.MulUint(u.CPUMillis).
			Add(s.Memory.MulUint(u.MemoryBytes).QuoUint(mib)).
			Add(s.Endpoint.MulUint(uint64(u.Endpoints))).
			Add(s.LeasedIP.MulUint(uint64(u.LeasedIPs)))
		for _, st := range u.Storage {
			rate, ok := s.Storage[st.Class]
			if !ok {
				return market.DecCoin{}, noBid(ReasonStorageClass, "resource unit %d uses storage class %q, which has no price", i, st.Class)
			}
			unit = unit.Add(rate.MulUint(st.Bytes).QuoUint(mib))
		}
		if u.GPUs > 0 {
			rate, ok := s.gpuRate(u.GPU.Model)
			if !ok {
				return market.DecCoin{}, noBid(ReasonGPUModel, "resource unit %d uses GPU model %q, which has no price (and there is no \"*\" price)", i, u.GPU.Model)
			}
			unit = unit.Add(rate.MulUint(uint64(u.GPUs)))
		}
		total = total.Add(unit.MulUint(uint64(u.Count)))
	}
	price := market.DecCoin{Amount: total, Denom: s.Denom}
	if convert {
		price = market.DecCoin{Amount: total.Mul(rate), Denom: r.MaxPrice.Denom}
	}
	return price, CheckPrice(price, r.MaxPrice)
}

// CheckPrice says whether price can be bid on an order priced at maxPrice: the same
// denomination, positive, at most the order's price.
func CheckPrice(price, maxPrice market.DecCoin) error {
	switch {
	case price.Denom != maxPrice.Denom:
		return noBid(ReasonDenom, "our price is in %q, the order's in %q", price.Denom, maxPrice.Denom)
	case price.Amount.Sign() <= 0:
		return noBid(ReasonPriceNotPositive, "our price %s is not positive", price)
	case price.Amount.Cmp(maxPrice.Amount) > 0:
		return noBid(ReasonPriceAboveMax, "our price %s is above the order's %s", price, maxPrice)
	}
	if _, err := market.ParseDec(price.Amount.String()); err != nil {
		return noBid(ReasonPriceOverflow, "our price %s cannot be bid: %v", price, err)
	}
	return nil
}
