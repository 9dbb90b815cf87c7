package market

import (
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
	})
}
