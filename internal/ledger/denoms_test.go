package ledger

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
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
	params := api.DefaultParams()
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
		dep, ok := params.MinDeployDeposit(denom)
		msg := &api.MsgCreateDeployment{ID: market.DeploymentID{Owner: owner, DSeq: uint64(i + 1)}, Groups: res.Groups, Version: res.Version, Deposit: dep}
		if !ok {
			// No deposit minimum: a denomination the chain does not take.
			msg.Deposit = market.Coin{Amount: 5_000_000, Denom: denom}
			if log := h.fail(api.CodeInvalidMsg, "tenant", msg); !strings.Contains(log, "is not accepted here") {
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

// TestGenesisAudits: attributes signed in genesis are on the chain from the first
// block, as if the auditor had signed them, and a genesis with a bad audit is refused
// with the entry named.
func TestGenesisAudits(t *testing.T) {
	attrs := market.Attributes{{Key: "region", Value: "us-west"}, {Key: "host", Value: "akash"}}
	var g api.GenesisState
	h := newHarnessGenesis(t, api.DefaultParams(), []market.Coin{{Amount: 1, Denom: api.DefaultDenom}}, func(h *harness, gs *api.GenesisState) {
		gs.Audits = []api.AuditedAttributes{{Owner: h.addr("provider"), Auditor: h.addr("auditor"), Attributes: attrs}}
		g = *gs
	}, "provider", "auditor")
	owner, auditor := h.addr("provider"), h.addr("auditor")
	h.block() // genesis is committed with the first block
	var audit api.AuditResponse
	h.mustQuery(api.QueryAudit.Path, api.AuditRequest{Owner: owner}, &audit)
	want := market.Attributes{{Key: "host", Value: "akash"}, {Key: "region", Value: "us-west"}}
	if len(audit.Attributes) != 1 || audit.Attributes[0].Auditor != auditor || !slices.Equal(audit.Attributes[0].Attributes, want) {
		t.Fatalf("audit %+v, want %s signed by %s", audit, want, auditor)
	}

	for name, tc := range map[string]struct {
		audit api.AuditedAttributes
		want  string
	}{
		"bad owner":     {api.AuditedAttributes{Owner: "cosmos1xyz", Auditor: auditor, Attributes: attrs}, "audits[0].owner"},
		"bad auditor":   {api.AuditedAttributes{Owner: owner, Auditor: "", Attributes: attrs}, "audits[0].auditor"},
		"no attributes": {api.AuditedAttributes{Owner: owner, Auditor: auditor}, "audits[0].attributes: none"},
		"key twice": {api.AuditedAttributes{Owner: owner, Auditor: auditor, Attributes: market.Attributes{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}},
			`key "a" is listed twice`},
	} {
		g := api.GenesisState{Params: api.DefaultParams(), Audits: []api.AuditedAttributes{tc.audit}}
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	twice := api.GenesisState{Params: api.DefaultParams(), Audits: []api.AuditedAttributes{g.Audits[0], g.Audits[0]}}
	if err := twice.Validate(); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("the same audit twice: %v", err)
	}
}
