package balance

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

const (
	testProvider = "akash1provider"
	testOwner    = "akash1tenant"
)

func lease(dseq uint64, gseq uint32) market.LeaseID {
	return market.LeaseID{Owner: testOwner, DSeq: dseq, GSeq: gseq, OSeq: 1, Provider: testProvider}
}

func uakt(n uint64) market.Coin { return market.Coin{Amount: market.Uint(n), Denom: "uakt"} }

func TestEarningsRaise(t *testing.T) {
	e := newEarnings(testProvider)
	step := func(id market.LeaseID, w market.Coin, state string, wantChanged bool) {
		t.Helper()
		changed, err := e.raise(id, w, state)
		if err != nil {
			t.Fatal(err)
		}
		if changed != wantChanged {
			t.Fatalf("raise(%s, %s, %s) changed = %v, want %v", id, w, state, changed, wantChanged)
		}
	}
	step(lease(1, 1), uakt(0), ledger.LeaseActive, false) // nothing paid: not recorded
	step(lease(1, 1), uakt(10), ledger.LeaseActive, true)
	step(lease(1, 1), uakt(10), ledger.LeaseActive, false)
	step(lease(1, 1), uakt(7), ledger.LeaseActive, false) // an older reading
	step(lease(1, 2), uakt(5), ledger.LeaseActive, true)
	step(lease(1, 1), uakt(12), ledger.LeaseClosed, true)
	step(lease(1, 1), uakt(12), ledger.LeaseActive, false) // closed stays closed
	if got := e.totals["uakt"]; got != 17 {
		t.Fatalf("total %d, want 17", got)
	}
	if l := e.leases[lease(1, 1)]; l.state != ledger.LeaseClosed || l.withdrawn != uakt(12) {
		t.Fatalf("lease 1/1: %+v", l)
	}
	if _, err := e.raise(lease(1, 2), market.Coin{Amount: 9, Denom: "ufoo"}, ledger.LeaseActive); err == nil {
		t.Fatal("a lease paid in another denomination was accepted")
	}
}

func TestEarningsFileRoundTrip(t *testing.T) {
	e := newEarnings(testProvider)
	for _, r := range []struct {
		id    market.LeaseID
		w     market.Coin
		state string
	}{
		{lease(1, 1), uakt(10), ledger.LeaseActive},
		{lease(2, 1), uakt(3), ledger.LeaseClosed},
		{lease(3, 1), market.Coin{Amount: 4, Denom: "ufoo"}, ledger.LeaseInsufficientFunds},
	} {
		if _, err := e.raise(r.id, r.w, r.state); err != nil {
			t.Fatal(err)
		}
	}
	e.lastHeight = 42
	e.lastTime = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	e.lastFull = e.lastTime.Add(-time.Minute)
	b, err := e.marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state", "earnings.json")
	if err := writeFileAtomic(path, b); err != nil {
		t.Fatal(err)
	}
	got, found, err := loadEarnings(path, testProvider)
	if err != nil || !found {
		t.Fatalf("load: %v (found %v)", err, found)
	}
	if got.lastHeight != 42 || !got.lastTime.Equal(e.lastTime) || !got.lastFull.Equal(e.lastFull) || len(got.leases) != 3 ||
		got.totals["uakt"] != 13 || got.totals["ufoo"] != 4 || got.leases[lease(2, 1)] != e.leases[lease(2, 1)] {
		t.Fatalf("loaded %+v, saved %+v", got, e)
	}
	again, err := got.marshal()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("marshal after load differs (%v):\n%s\n%s", err, again, b)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(entries) != 1 {
		t.Fatalf("the state directory holds %v (%v), want the file alone", entries, err)
	}
	// Absent: an empty record.
	if e, found, err := loadEarnings(filepath.Join(t.TempDir(), "none.json"), testProvider); err != nil || found || len(e.leases) != 0 {
		t.Fatalf("missing file: %+v %v %v", e, found, err)
	}
}

func TestEarningsFileCorrupt(t *testing.T) {
	valid := `{"version": 1, "provider": "akash1provider", "totals": ["15uakt"], "leases": [
	  {"lease": "akash1tenant/1/1/1/akash1provider", "withdrawn": "10uakt", "state": "active"},
	  {"lease": "akash1tenant/2/1/1/akash1provider", "withdrawn": "5uakt", "state": "closed"}]}`
	if _, err := parseEarnings([]byte(valid), testProvider); err != nil {
		t.Fatalf("valid record: %v", err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"not json", valid, "{", "unexpected EOF"},
		{"trailing data", valid, valid + "{}", "data after the record"},
		{"unknown field", `"version": 1,`, `"version": 1, "extra": true,`, "unknown field"},
		{"version", `"version": 1`, `"version": 2`, "version 2"},
		{"provider", `"provider": "akash1provider"`, `"provider": "akash1other"`, `provider "akash1other"`},
		{"bad lease", `akash1tenant/2/1/1/akash1provider`, `akash1tenant/x/1/1/akash1provider`, "leases[1]"},
		{"other provider's lease", `akash1tenant/2/1/1/akash1provider`, `akash1tenant/2/1/1/akash1other`, "another provider's"},
		{"duplicate", `akash1tenant/2/1/1/akash1provider", "withdrawn": "5uakt"`, `akash1tenant/1/1/1/akash1provider", "withdrawn": "5uakt"`, "listed twice"},
		{"bad amount", `"withdrawn": "5uakt"`, `"withdrawn": "5"`, "leases[1].withdrawn"},
		{"zero amount", `"withdrawn": "5uakt"`, `"withdrawn": "0uakt"`, "paid nothing"},
		{"bad state", `"state": "closed"`, `"state": "gone"`, `leases[1].state "gone"`},
		{"totals wrong", `"15uakt"`, `"16uakt"`, "add up to 15uakt"},
		{"totals missing", `["15uakt"]`, `[]`, "uakt is missing"},
		{"totals extra", `["15uakt"]`, `["15uakt", "0ufoo"]`, "add up to 0ufoo"},
		{"totals twice", `["15uakt"]`, `["15uakt", "15uakt"]`, "listed twice"},
		{"negative height", `"version": 1,`, `"version": 1, "last_withdrawal_height": -3,`, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := strings.Replace(valid, tt.old, tt.new, 1)
			if b == valid {
				t.Fatal("the change did not apply")
			}
			_, err := parseEarnings([]byte(b), testProvider)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parse = %v, want an error with %q", err, tt.want)
			}
		})
	}
	// Load names the file.
	path := filepath.Join(t.TempDir(), "earnings.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadEarnings(path, testProvider); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("load of a corrupt file = %v, want an error naming %s", err, path)
	}
}

// FuzzLoadEarnings checks that any file either loads into a record that writes back
// the same way, or is refused; never a panic.
func FuzzLoadEarnings(f *testing.F) {
	f.Add([]byte(`{"version": 1, "provider": "akash1provider", "totals": ["15uakt"], "leases": [
	  {"lease": "akash1tenant/1/1/1/akash1provider", "withdrawn": "10uakt", "state": "active"},
	  {"lease": "akash1tenant/2/1/1/akash1provider", "withdrawn": "5uakt", "state": "closed"}]}`))
	f.Add([]byte(`{"version": 1, "provider": "akash1provider", "last_withdrawal_height": "7", "last_withdrawal": "2025-01-02T03:04:05Z", "totals": [], "leases": []}`))
	f.Add([]byte(`{"version": 1, "provider": "akash1provider", "totals": ["18446744073709551615uakt"], "leases": [
	  {"lease": "a/1/1/1/akash1provider", "withdrawn": "18446744073709551615uakt", "state": "active"},
	  {"lease": "a/01/1/1/akash1provider", "withdrawn": "1uakt", "state": "active"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseEarnings(b, testProvider)
		if err != nil {
			return
		}
		out, err := e.marshal()
		if err != nil {
			t.Fatalf("marshal a loaded record: %v", err)
		}
		e2, err := parseEarnings(out, testProvider)
		if err != nil {
			t.Fatalf("a written record does not load: %v\n%s", err, out)
		}
		out2, err := e2.marshal()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("a record changed on its way through the file (%v):\n%s\n%s", err, out, out2)
		}
	})
}
