package onchain

import (
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newEngine builds an engine with a history of 1000 decisions.
func newEngine(tb testing.TB, cfg bidengine.EngineConfig, c bidengine.Capacity) *bidengine.Engine {
	tb.Helper()
	h, err := bidengine.NewHistory(1000, nil)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := bidengine.NewEngine(cfg, c, h)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// rates are the scale rates the tests bid with: per millicpu, MiB of memory and of
// storage, endpoint and GPU, in uakt.
func rates(tb testing.TB) *bidengine.ScaleRates {
	tb.Helper()
	d := func(s string) market.Dec {
		v, err := market.ParseDec(s)
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
	return &bidengine.ScaleRates{
		Denom: "uakt", CPU: d("0.1"), Memory: d("0.01"), Endpoint: d("1"),
		Storage: map[string]market.Dec{bidengine.ClassEphemeral: d("0.001"), "beta3": d("0.002")},
		GPU:     map[string]market.Dec{"a100": d("100"), "*": d("50")},
	}
}
