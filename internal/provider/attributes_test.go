package provider

import (
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

func TestParseAttributes(t *testing.T) {
	tests := []struct {
		name, in string
		want     market.Attributes
		err      string
	}{
		{name: "provider.yaml", in: "host: https://p.example.com:8443\nattributes:\n  - key: region\n    value: us-west\n  - key: tier\n    value: community\n",
			want: market.Attributes{{Key: "region", Value: "us-west"}, {Key: "tier", Value: "community"}}},
		{name: "bare list", in: "- {key: region, value: eu}\n", want: market.Attributes{{Key: "region", Value: "eu"}}},
		{name: "json", in: `{"attributes":[{"key":"a","value":"1"}]}`, want: market.Attributes{{Key: "a", Value: "1"}}},
		{name: "numbers are text", in: "- {key: cpu-gen, value: 4}\n", want: market.Attributes{{Key: "cpu-gen", Value: "4"}}},
		{name: "empty", in: "", err: "empty"},
		{name: "no attributes", in: "host: x\n", err: `no "attributes" key`},
		{name: "not a list", in: "attributes: {key: a}\n", err: "must be a list"},
		{name: "duplicate", in: "- {key: a, value: 1}\n- {key: a, value: 2}\n", err: "line 2: attributes[1]: key \"a\" is listed twice"},
		{name: "missing value", in: "- {key: a}\n", err: "needs a non-empty key and a value"},
		{name: "unknown field", in: "- {key: a, value: b, extra: c}\n", err: `unknown field "extra"`},
		{name: "nested value", in: "- {key: a, value: [1]}\n", err: "must be a scalar"},
		{name: "bad yaml", in: "- {key: a\n", err: "attributes file:"},
		{name: "second document", in: "attributes:\n  - {key: a, value: 1}\n---\nattributes:\n  - {key: b, value: 2}\n",
			err: "attributes file: line 4: a second YAML document"},
		{name: "markers around one document", in: "---\n- {key: a, value: 1}\n---\n", want: market.Attributes{{Key: "a", Value: "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAttributes([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func FuzzParseAttributes(f *testing.F) {
	f.Add([]byte("attributes:\n  - key: region\n    value: us-west\n"))
	f.Add([]byte("- &a {key: x, value: y}\n- *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		attrs, err := ParseAttributes(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, a := range attrs {
			if strings.TrimSpace(a.Key) == "" || seen[a.Key] {
				t.Fatalf("accepted bad attributes %v", attrs)
			}
			seen[a.Key] = true
		}
	})
}
