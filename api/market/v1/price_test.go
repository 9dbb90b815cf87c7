package market

import (
	"encoding/json"
	"math/big"
	"testing"
)

func TestParseDec(t *testing.T) {
	tests := []struct {
		in, want string // want "" means an error
	}{
		{"100", "100.000000000000000000"},
		{"0.5", "0.500000000000000000"},
		{"+2", "2.000000000000000000"},
		{"-1.25", "-1.250000000000000000"},
		{"0.000000000000000001", "0.000000000000000001"},
		{"0.0000000000000000001", ""}, // 19 decimals
		{"", ""}, {"-", ""}, {"+", ""}, {".5", ""}, {"5.", ""}, {"1e3", ""}, {"--5", ""}, {"+-5", ""}, {"1_000", ""}, {" 1", ""},
	}
	for _, tt := range tests {
		d, err := ParseDec(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("ParseDec(%q) = %s, want an error", tt.in, d)
		case tt.want != "" && (err != nil || d.String() != tt.want):
			t.Errorf("ParseDec(%q) = %s, %v; want %s", tt.in, d, err, tt.want)
		}
	}
}

// FuzzParseDec checks that whatever ParseDec accepts is the exact value the text means
// and prints back to itself.
func FuzzParseDec(f *testing.F) {
	for _, s := range []string{"1", "0.5", "-3.25", "+7", "1.000000000000000001", "99999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDec(s)
		if err != nil {
			return
		}
		exact, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ParseDec accepted %q, which is not a number", s)
		}
		got, _ := new(big.Rat).SetString(d.String())
		if got.Cmp(exact) != 0 {
			t.Fatalf("ParseDec(%q) = %s", s, d)
		}
		again, err := ParseDec(d.String())
		if err != nil || again.Cmp(d) != 0 {
			t.Fatalf("%s does not parse back: %v", d, err)
		}
		var short Dec
		if err := short.UnmarshalText([]byte(d.Short())); err != nil || short.Cmp(d) != 0 {
			t.Fatalf("%s's short form %q does not read back: %v", d, d.Short(), err)
		}
	})
}

func TestDecArithmetic(t *testing.T) {
	d, err := ParseDec("10.000000000000000005")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.QuoUint(4).String(); got != "2.500000000000000001" {
		t.Fatalf("10.000000000000000005 / 4 = %s", got)
	}
	if got := NewDec(-7).QuoUint(2).String(); got != "-3.500000000000000000" {
		t.Fatalf("-7 / 2 = %s", got)
	}
	n, ok := d.TruncateUint()
	if !ok || n != 10 {
		t.Fatalf("truncate %d %v", n, ok)
	}
	if _, ok := NewDec(-1).TruncateUint(); ok {
		t.Fatal("truncated a negative")
	}
	if got := DecFromUint(3).Sub(d).String(); got != "-7.000000000000000005" {
		t.Fatalf("3 - d = %s", got)
	}
	if q := NewDec(10).QuoFloor(NewDec(3), 100); q != 3 {
		t.Fatalf("10 // 3 = %d", q)
	}
	if q := NewDec(10).QuoFloor(NewDec(3), 2); q != 2 {
		t.Fatalf("capped quotient %d", q)
	}
}

// TestDecText: settings files have the short form; JSON keeps the canonical string.
func TestDecText(t *testing.T) {
	for in, want := range map[string]string{"0.0100": "0.01", "12": "12", "-1.50": "-1.5", "0": "0", "0.000000000000000001": "0.000000000000000001"} {
		var d Dec
		if err := d.UnmarshalText([]byte(in)); err != nil {
			t.Fatal(err)
		}
		if b, _ := d.MarshalText(); string(b) != want {
			t.Errorf("%s: text %s, want %s", in, b, want)
		}
	}
	var d Dec
	if err := d.UnmarshalText([]byte("lots")); err == nil {
		t.Error("lots read as a decimal")
	}
	b, err := json.Marshal(struct{ Rate Dec }{MustParseDec("0.01")})
	if err != nil || string(b) != `{"Rate":"0.010000000000000000"}` {
		t.Errorf("JSON %s, %v: want the canonical string", b, err)
	}
}

func TestDecCoinShort(t *testing.T) {
	for in, want := range map[string]string{
		"31.6496uakt": "31.6496uakt", "900uakt": "900uakt", "0.5uakt": "0.5uakt", "0uakt": "0uakt", "1000.000000000000000001uakt": "1000.000000000000000001uakt",
	} {
		c, err := ParseDecCoin(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Short(); got != want {
			t.Errorf("%s: Short() = %s, want %s", in, got, want)
		}
	}
}
