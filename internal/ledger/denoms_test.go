package ledger

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/sdl"
)

// TestCorpusDeploysAsWritten creates, on a chain with the default parameters, the
// deployment of every SDL of the conformance corpus that Akash reads: each must be
// accepted as written, priced in uakt, uact or IBC USDC, with the ledger's minimum
// deposit in its own denomination. A file priced in a denomination no chain takes is
// refused with the reason.
func TestCorpusDeploysAsWritten(t *testing.T) {
	files, err := filepath.Glob("../sdl/testdata/corpus/*/input.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus under ../sdl/testdata/corpus (%v)", err)
	}
	params := DefaultParams()
	var fund []market.Coin
	for _, d := range params.Denoms {
		fund = append(fund, market.Coin{Amount: 1_000_000_000_000, Denom: d})
	}
	h := newHarnessFunded(t, params, fund, "tenant")
	owner := h.addr("tenant")
	byDenom := map[string]int{}
	refused := 0
	for i, f := range files {
		name := filepath.Base(filepath.Dir(f))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := sdl.Parse(b, sdl.Options{})
		if err != nil {
			continue // Akash rejects it too (the conformance test checks that)
		}
		denom := res.Groups[0].Resources[0].Price.Denom
		dep, ok := params.minDeployDeposit(denom)
		msg := &MsgCreateDeployment{ID: market.DeploymentID{Owner: owner, DSeq: uint64(i + 1)}, Groups: res.Groups, Version: res.Version, Deposit: dep}
		if !ok {
			// No deposit minimum: a denomination the chain does not take.
			msg.Deposit = market.Coin{Amount: 5_000_000, Denom: denom}
			if log := h.fail(CodeInvalidMsg, "tenant", msg); !strings.Contains(log, "is not accepted here") {
				t.Errorf("%s: priced in %q, refused with %q", name, denom, log)
			}
			h.seq[owner]-- // refused by ValidateBasic, before the sequence is spent
			refused++
			continue
		}
		r := h.block(h.tx("tenant", msg))[0]
		if r.Code != 0 {
			t.Errorf("%s: priced in %s, refused: %s", name, denom, r.Log)
			continue
		}
		byDenom[denom]++
	}
	for _, d := range params.Denoms {
		if byDenom[d] == 0 {
			t.Errorf("no corpus file priced in %s was deployed", d)
		}
	}
	if refused != 1 {
		t.Errorf("%d files refused for their denomination, want 1 (ct-schema-only-invalid_invalid-denom)", refused)
	}
	denoms := make([]string, 0, len(byDenom))
	for d := range byDenom {
		denoms = append(denoms, d)
	}
	slices.Sort(denoms)
	for _, d := range denoms {
		t.Logf("%d deployments priced in %s", byDenom[d], d)
	}
}
