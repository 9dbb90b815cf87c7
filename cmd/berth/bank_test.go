package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/testenv"
)

// TestBankCommands funds a new key (made with `keys add` in a home of its own, as for
// a second provider) through `bank send` against an in-process ledger node, reads the
// balances, and checks the refusals: a bad address or amount, no --from, more than the
// account holds.
func TestBankCommands(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{Accounts: []string{"tenant", "poor"}})
	cli := ledgerCLI(t, l)
	other := t.TempDir()
	out, err := run(t, "keys", "add", "provider2", "--home", other, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ Address string }
	if err := json.Unmarshal([]byte(out), &key); err != nil {
		t.Fatalf("keys add: %s (%v)", out, err)
	}
	tenant := l.Address(t, "tenant")

	out = cli("bank", "send", key.Address, "5000000uakt,7000000uact", "--from", "tenant")
	for _, want := range []string{"send: in block ", "(tx ", "transfer amount=5000000uakt from=" + tenant + " to=" + key.Address,
		"transfer amount=7000000uact from=" + tenant + " to=" + key.Address} {
		if !strings.Contains(out, want) {
			t.Errorf("send printed no %q:\n%s", want, out)
		}
	}
	// Its balance, from the other home's key (only the node is shared) and by address.
	out, err = run(t, "bank", "balance", "--home", other, "--node", l.RPC(), "--from", "provider2")
	if want := key.Address + ": 7000000uact,5000000uakt\n"; err != nil || out != want {
		t.Errorf("balance of the new key: %q (%v), want %q", out, err, want)
	}
	var bal struct {
		Address  string
		Balances []market.Coin
	}
	if err := json.Unmarshal([]byte(cli("bank", "balance", key.Address, "-o", "json")), &bal); err != nil {
		t.Fatal(err)
	}
	if bal.Address != key.Address || len(bal.Balances) != 2 || bal.Balances[1] != (market.Coin{Amount: 5000000, Denom: ledger.DenomAKT}) {
		t.Errorf("balance -o json: %+v", bal)
	}
	var res struct {
		Height int64
		TxHash string
	}
	if err := json.Unmarshal([]byte(cli("bank", "send", key.Address, "1uakt", "--from", "tenant", "-o", "json")), &res); err != nil || res.Height < 1 {
		t.Errorf("send -o json: %+v (%v)", res, err)
	}
	empty := testenvAddress(t)
	if out := cli("bank", "balance", empty); out != empty+": nothing\n" {
		t.Errorf("balance of an unknown account: %q", out)
	}

	// The poor account spends its uakt, then has too little.
	cli("bank", "send", key.Address, "1000000000000uakt", "--from", "poor")
	for _, tt := range []struct {
		args    []string
		code    int
		message string
	}{
		{[]string{"bank", "send", "akash1nope", "5uakt", "--from", "tenant"}, 2, `TO "akash1nope": not an account address of this chain (akash1…)`},
		{[]string{"bank", "send", strings.Replace(key.Address, "akash", "cosmos", 1), "5uakt", "--from", "tenant"}, 2, `TO "cosmos1`},
		{[]string{"bank", "send", strings.ToUpper(key.Address), "5uakt", "--from", "tenant"}, 2, "not in lower case"},
		{[]string{"bank", "send", key.Address, "5", "--from", "tenant"}, 2, `AMOUNT "5": coin "5": "" is not a valid denomination`},
		{[]string{"bank", "send", key.Address, "uakt", "--from", "tenant"}, 2, "want an amount then a denomination, like 5000000uakt"},
		{[]string{"bank", "send", key.Address, "1.5uakt", "--from", "tenant"}, 2, `AMOUNT "1.5uakt"`},
		{[]string{"bank", "send", key.Address, "-5uakt", "--from", "tenant"}, 2, "unknown shorthand flag"},
		{[]string{"bank", "send", key.Address, "0uakt", "--from", "tenant"}, 2, "coin 1 (0uakt) is zero"},
		{[]string{"bank", "send", key.Address, "5uakt,6uakt", "--from", "tenant"}, 2, "uakt is listed twice"},
		{[]string{"bank", "send", key.Address, "5uakt,", "--from", "tenant"}, 2, `coin ""`},
		{[]string{"bank", "send", key.Address, "5uakt"}, 2, "--from is required"},
		{[]string{"bank", "send", key.Address}, 2, "expected 2 argument(s), got 1"},
		{[]string{"bank", "send", key.Address, "5uakt", "--from", "nobody"}, 1, `key "nobody": no such key`},
		{[]string{"bank", "send", key.Address, "5uakt", "--from", "poor"}, 1, "insufficient_funds"},
		{[]string{"bank", "send", key.Address, "5uakt", "--from", "poor"}, 1, "has 0uakt, needs 5uakt"},
		{[]string{"bank", "balance"}, 2, "give an ADDRESS, or --from"},
		{[]string{"bank", "balance", "akash1nope"}, 2, `ADDRESS "akash1nope"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, append(tt.args, "--home", l.Home(), "--node", l.RPC())...)
			if got := exitCode(err); got != tt.code || err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("exit %d, error %v; want exit %d with %q", got, err, tt.code, tt.message)
			}
		})
	}
	// The refusals moved nothing.
	if out := cli("bank", "balance", key.Address); out != key.Address+": 7000000uact,1000005000001uakt\n" {
		t.Errorf("balance after the refusals: %q", out)
	}
}

// testenvAddress is an address no account has.
func testenvAddress(t *testing.T) string {
	t.Helper()
	a, err := ledger.AddressFromBytes(ledger.DefaultAddressPrefix, []byte("an address nobody has")[:20])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// FuzzParseCoins: AMOUNT is refused with a usage error, or is positive coins with no
// denomination twice, which read the same once printed.
func FuzzParseCoins(f *testing.F) {
	for _, s := range []string{"5000000uakt", "5000000uakt,5000000uact", "1ibc/170C677610AC31DF0904FFE09CD3B5C657492170E7E52372E48756B71E56F2F1",
		"0uakt", "5uakt,5uakt", "5", "uakt", "1.5uakt", "5uakt,", " 5uakt , 6uact ", "18446744073709551616uakt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		coins, err := parseCoins(s)
		if err != nil {
			if exitCode(err) != 2 {
				t.Fatalf("%q: not a usage error: %v", s, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range coins {
			if c.Amount == 0 || seen[c.Denom] || !market.ValidDenom(c.Denom) {
				t.Fatalf("%q: accepted %v", s, coins)
			}
			seen[c.Denom] = true
		}
		again, err := parseCoins(formatCoins(coins))
		if err != nil || !slices.Equal(again, coins) {
			t.Fatalf("%q reads as %v, printed %q, which reads as %v (%v)", s, coins, formatCoins(coins), again, err)
		}
	})
}
