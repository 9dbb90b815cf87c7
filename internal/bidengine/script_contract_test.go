package bidengine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

// decodeJSON decodes one JSON value with numbers kept as written.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if d.More() {
		t.Fatalf("more than one JSON value in %s", b)
	}
	return v
}

// TestScriptStdin runs a script that saves its stdin, and compares every field with
// what Akash's provider sends for the same group.
func TestScriptStdin(t *testing.T) {
	tests := []struct {
		name string
		req  func(*testing.T) Request
		want string
	}{
		{"gpu", gpuRequest, `{
			"resources": [{
				"memory": 8589934592,
				"cpu": 2000,
				"gpu": {"units": 2, "attributes": {"vendor": {"nvidia": {"model": "a100", "ram": "80Gi"}}}},
				"storage": [
					{"class": "ram", "size": 536870912},
					{"class": "ephemeral", "size": 1073741824},
					{"class": "beta3", "size": 10737418240}
				],
				"count": 3,
				"endpoint_quantity": 3,
				"ip_lease_quantity": 1
			}],
			"price": {"denom": "uakt", "amount": "300000.000000000000000000"},
			"price_precision": 6
		}`},
		{"plain", func(*testing.T) Request { return plainRequest() }, `{
			"resources": [
				{
					"memory": 536870912, "cpu": 500,
					"gpu": {"units": 0, "attributes": {}},
					"storage": [{"class": "ephemeral", "size": 1073741824}],
					"count": 1, "endpoint_quantity": 1, "ip_lease_quantity": 0
				},
				{
					"memory": 134217728, "cpu": 100,
					"gpu": {"units": 0, "attributes": {}},
					"storage": [],
					"count": 2, "endpoint_quantity": 0, "ip_lease_quantity": 0
				}
			],
			"price": {"denom": "uakt", "amount": "1000.000000000000000000"},
			"price_precision": 6
		}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := filepath.Join(t.TempDir(), "stdin.json")
			p := newScriptPricer(t, ScriptConfig{Path: writeScript(t, fmt.Sprintf(`cat > %s; echo 1`, saved))})
			if _, err := p.Price(t.Context(), tt.req(t)); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			// One line, as Akash's json.Encoder writes it.
			if !bytes.HasSuffix(got, []byte("\n")) || bytes.Count(got, []byte("\n")) != 1 {
				t.Fatalf("stdin is not one line of JSON: %q", got)
			}
			if g, w := decodeJSON(t, got), decodeJSON(t, []byte(tt.want)); !reflect.DeepEqual(g, w) {
				t.Fatalf("stdin\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestScriptEnvironment(t *testing.T) {
	// The provider's environment is passed on; AKASH_OWNER and AKASH_DENOM are the
	// request's even when the provider's environment has them.
	t.Setenv("BERTH_PRICING_TEST", "inherited")
	t.Setenv("AKASH_OWNER", "akash1stale")
	saved := filepath.Join(t.TempDir(), "env")
	script := writeScript(t, fmt.Sprintf(`printf '%%s|%%s|%%s\n' "$AKASH_OWNER" "$AKASH_DENOM" "$BERTH_PRICING_TEST" > %s; echo 1`, saved))
	p := newScriptPricer(t, ScriptConfig{Path: script})
	r := plainRequest()
	r.MaxPrice.Denom = "ibc/170C677610AC31DF0904FFE09CD3B5C657492170E7E52372E48756B71E56F2F1"
	price, err := p.Price(t.Context(), r)
	if err != nil || price.Denom != r.MaxPrice.Denom {
		t.Fatalf("price %s %v", price, err)
	}
	got, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if want := "akash1plain|" + r.MaxPrice.Denom + "|inherited\n"; string(got) != want {
		t.Fatalf("environment %q, want %q", got, want)
	}
}

func TestParseScriptPrice(t *testing.T) {
	for in, want := range map[string]string{
		"12":                     "12",
		"0.000123\n":             "0.000123",
		" \t7.5 \r\n":            "7.5",
		"+2":                     "2",
		"-1.25":                  "-1.25",
		"0":                      "0",
		"0.000000000000000001":   "0.000000000000000001",
		"00012.100000000000000 ": "12.1",
	} {
		d, err := ParseScriptPrice([]byte(in))
		if err != nil || d.Cmp(dec(t, want)) != 0 {
			t.Errorf("ParseScriptPrice(%q) = %s, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{
		"", " \n", "1e3", "1E3", ".5", "5.", "+.5", "--5", "-+5", "1,5", "0x10", "1_000", "NaN", "Inf",
		"1 2", "1\n2", "12uakt", "0.0000000000000000001", "\ufeff1", strings.Repeat("9", 200),
	} {
		if d, err := ParseScriptPrice([]byte(in)); err == nil {
			t.Errorf("ParseScriptPrice(%q) = %s, want an error", in, d)
		}
	}
}

func FuzzParseScriptPrice(f *testing.F) {
	for _, s := range []string{"12", "0.000123", "1e3", " 7 \n", "-1", "+2", "", "1.", ".5", "-0", "--5",
		"0.0000000000000000001", strings.Repeat("9", 77) + ".5", strings.Repeat("9", 78)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		d, err := ParseScriptPrice(out)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(out))
		if neg := strings.HasPrefix(s, "-"); neg && d.Sign() > 0 || !neg && d.Sign() < 0 {
			t.Fatalf("%q parsed as %s: wrong sign", out, d)
		}
		again, err := market.ParseDec(d.String())
		if err != nil || again.Cmp(d) != 0 {
			t.Fatalf("%q parsed as %s, which reads back as %s, %v", out, d, again, err)
		}
		if again, err := ParseScriptPrice([]byte(d.String())); err != nil || again.Cmp(d) != 0 {
			t.Fatalf("%q parsed as %s, which the parser reads back as %s, %v", out, d, again, err)
		}
	})
}
