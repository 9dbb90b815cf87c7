package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"berth.dev/berth/api/market/v1"
)

// Quantity is a size or an amount in provider.yaml, as Kubernetes writes them (16Gi,
// 1Ti, 4, 500m), read and checked with the file: a value that is not one, or is
// negative, is refused with its line. The zero Quantity (left out, or "") is unset.
type Quantity struct {
	q   resource.Quantity
	set bool
}

// MustQuantity reads s, a constant of code or a test; it panics on a bad one.
func MustQuantity(s string) Quantity {
	var q Quantity
	if err := q.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return q
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (q *Quantity) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*q = Quantity{}
		return nil
	}
	v, err := resource.ParseQuantity(string(b))
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a size or an amount (e.g. 16Gi, 1Ti, 4 or 500m)", b)
	case v.Sign() < 0:
		return fmt.Errorf("%q: must not be negative", b)
	}
	*q = Quantity{q: v, set: true}
	return nil
}

// MarshalText implements encoding.TextMarshaler (unset: empty).
func (q Quantity) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// String is the quantity as Kubernetes writes it ("" when unset).
func (q Quantity) String() string {
	if !q.set {
		return ""
	}
	return q.q.String()
}

// IsSet says a value was given.
func (q Quantity) IsSet() bool { return q.set }

// Value is the quantity in units (bytes for a size), rounded up; 0 when unset.
func (q Quantity) Value() int64 { return q.q.Value() }

// MilliValue is the quantity in thousandths (millicores for a CPU amount), rounded up.
func (q Quantity) MilliValue() int64 { return q.q.MilliValue() }

// Coin is an amount of one denomination in provider.yaml (5000000uakt), read and
// checked with the file. The zero Coin (left out, or "") is unset.
type Coin struct {
	c   market.Coin
	set bool
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Coin) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = Coin{}
		return nil
	}
	v, err := market.ParseCoin(string(b))
	if err != nil {
		return err // it names the value
	}
	*c = Coin{c: v, set: true}
	return nil
}

// MarshalText implements encoding.TextMarshaler (unset: empty).
func (c Coin) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// String is the amount as written ("" when unset).
func (c Coin) String() string {
	if !c.set {
		return ""
	}
	return c.c.String()
}

// SettingSchema is a coin's JSON schema in the chart's values: a string (a number
// alone lacks the denomination).
func (Coin) SettingSchema() map[string]any {
	return map[string]any{"type": "string", "description": "an amount and its denomination (5000000uakt)"}
}

// Get is the amount and whether it was given.
func (c Coin) Get() (market.Coin, bool) { return c.c, c.set }
