package ownership

import (
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

func TestLeaseLabelsRoundTrip(t *testing.T) {
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 2, OSeq: 3, Provider: "akash1prov"}
	got, ok := LeaseFromLabels(LeaseLabels(id, "chain-a"))
	if !ok || got != id {
		t.Fatalf("%+v %v", got, ok)
	}
	l := LeaseLabels(id, "chain-a")
	l[LabelDSeq] = "x"
	if _, ok := LeaseFromLabels(l); ok {
		t.Fatal("a bad dseq label parsed")
	}
}

// TestOwner: a provider on a chain owns its objects only: not another provider's, not
// its own on another chain; objects written before the chain ID was recorded are its.
func TestOwner(t *testing.T) {
	me := Owner{Provider: "akash1prov", ChainID: "chain-a"}
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 2, OSeq: 3, Provider: me.Provider}
	legacy := LeaseLabels(id, "")
	delete(legacy, LabelChainID)
	otherProvider := id
	otherProvider.Provider = "akash1rival"
	for _, c := range []struct {
		name   string
		labels map[string]string
		owns   bool
	}{
		{"ours", me.LeaseLabels(id), true},
		{"ours before chain IDs were recorded", legacy, true},
		{"ours on another chain", LeaseLabels(id, "chain-b"), false},
		{"another provider's", LeaseLabels(otherProvider, "chain-a"), false},
		{"not berth's", map[string]string{LabelProvider: me.Provider}, false},
	} {
		if got := me.Owns(c.labels); got != c.owns {
			t.Errorf("%s: Owns = %v", c.name, got)
		}
		if got, ok := me.LeaseOf(c.labels); ok != c.owns || (ok && got != id) {
			t.Errorf("%s: LeaseOf = %v %v", c.name, got, ok)
		}
	}
	if err := me.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Owner{{Provider: me.Provider}, {ChainID: "x"}, {Provider: me.Provider, ChainID: "bad chain"}, {Provider: me.Provider, ChainID: strings.Repeat("c", 64)}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if got := me.Selector(); got != "berth.dev/managed=true,berth.dev/provider=akash1prov" {
		t.Fatalf("selector %q", got)
	}
}
