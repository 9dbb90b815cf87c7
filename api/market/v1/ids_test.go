package market

import (
	"strings"
	"testing"
)

func TestParseIDs(t *testing.T) {
	l, err := ParseLeaseID("akash1abc/12/1/2/akash1xyz")
	if err != nil {
		t.Fatal(err)
	}
	if l != (LeaseID{Owner: "akash1abc", DSeq: 12, GSeq: 1, OSeq: 2, Provider: "akash1xyz"}) || l.String() != "akash1abc/12/1/2/akash1xyz" {
		t.Fatalf("lease %+v %s", l, l)
	}
	if l.Order().String() != "akash1abc/12/1/2" || l.Deployment().String() != "akash1abc/12" || l.Order().Group().String() != "akash1abc/12/1" {
		t.Fatalf("parents of %s", l)
	}
	for _, bad := range []struct{ in, err string }{
		{"akash1abc/12/1", "want OWNER/DSEQ/GSEQ/OSEQ/PROVIDER"},
		{"akash1abc//1/2/p", "empty part"},
		{"akash1abc/x/1/2/p", `dseq "x" is not an unsigned 64-bit number`},
		{"akash1abc/1/4294967296/2/p", "gseq"},
		{"akash1abc/1/1/-2/p", "oseq"},
	} {
		if _, err := ParseLeaseID(bad.in); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("ParseLeaseID(%q) = %v, want an error with %q", bad.in, err, bad.err)
		}
	}
}

func TestParseCoins(t *testing.T) {
	c, err := ParseCoin("5000000uakt")
	if err != nil || c != (Coin{Amount: 5000000, Denom: "uakt"}) || c.String() != "5000000uakt" {
		t.Fatalf("%v %v", c, err)
	}
	d, err := ParseDecCoin("0.25uakt")
	if err != nil || d.String() != "0.250000000000000000uakt" {
		t.Fatalf("%v %v", d, err)
	}
	for _, bad := range []string{"", "uakt", "5", "5u", "-5uakt", "99999999999999999999uakt", "5 uakt", "5uakt!"} {
		if _, err := ParseCoin(bad); err == nil {
			t.Errorf("ParseCoin(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", ".5uakt", "1.uakt", "1.5", "1.2.3uakt"} {
		if _, err := ParseDecCoin(bad); err == nil {
			t.Errorf("ParseDecCoin(%q) accepted", bad)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("akash1abc/12/1/2/akash1xyz")
	f.Add("a/1/1/1/b")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLeaseID(s)
		if err != nil {
			return
		}
		again, err := ParseLeaseID(l.String())
		if err != nil || again != l {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, l, l.String(), again, err)
		}
	})
}

func FuzzParseCoin(f *testing.F) {
	f.Add("5000000uakt")
	f.Add("1.5ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2")
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ParseCoin(s); err == nil {
			if again, err := ParseCoin(c.String()); err != nil || again != c {
				t.Fatalf("%q → %v → %v, %v", s, c, again, err)
			}
		}
		if d, err := ParseDecCoin(s); err == nil {
			again, err := ParseDecCoin(d.String())
			if err != nil || again.Denom != d.Denom || again.Amount.Cmp(d.Amount) != 0 {
				t.Fatalf("%q → %v → %v, %v", s, d, again, err)
			}
		}
	})
}
