package market

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// akashCanonical is what Akash hashes: the manifest encoded with encoding/json, decoded
// into generic values and encoded again (Cosmos SDK's SortJSON).
func akashCanonical(t testing.TB, m Manifest) []byte {
	t.Helper()
	first, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(first, &generic); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CheckCanonical fails t unless m's canonical JSON is exactly what Akash hashes.
func checkCanonical(t testing.TB, m Manifest) {
	t.Helper()
	want := akashCanonical(t, m)
	if got := m.AppendCanonicalJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("canonical JSON differs from Akash's\n ours:  %s\n akash: %s", got, want)
	}
}

func sampleManifest() Manifest {
	return Manifest{{Name: "dc <1> & \"2\"", Services: []Service{{
		Name: "web", Image: "nginx\u2028\u2029\x01\b\f\n\r\t\\\x7f", Args: []string{}, Env: []string{"A=\xff\xfe", "B=é"},
		Count: 3, Credentials: &ServiceCredentials{Host: "h", Password: "p"},
		Expose: []ServiceExpose{{Port: 80, Proto: ProtoTCP, Global: true, Hosts: []string{"a.b"},
			HTTPOptions: ServiceHTTPOptions{MaxBodySize: 1 << 20, NextCases: []string{"error"}, NextTries: 3}, EndpointSequenceNumber: 4, IP: "x"}},
		Params: &ServiceParams{Permissions: &ServicePermissions{}, Storage: []StorageParams{{Name: "d", Mount: "/d", ReadOnly: true}}, TEE: &TEEParams{Type: TEETypeCPU, Attestation: true}},
		Resources: Resources{ID: 1, CPU: &CPU{Units: ResourceValue{100}, Attributes: Attributes{{Key: "arch"}}},
			GPU:    &GPU{Units: ResourceValue{1}, Attributes: Attributes{{Key: "vendor/nvidia/model/*", Value: "true"}, {Value: "v"}}},
			Memory: &Memory{Size: ResourceValue{1 << 30}}, Storage: []Storage{{Name: "default", Size: ResourceValue{5 << 20}},
				{Name: "d", Size: ResourceValue{1 << 40}, Attributes: Attributes{{Key: "class", Value: "beta2"}, {Key: "persistent", Value: "true"}}}},
			Endpoints: Endpoints{{Kind: EndpointSharedHTTP}, {Kind: EndpointLeasedIP, SequenceNumber: 4}}},
	}, {Name: "w2", Expose: []ServiceExpose{}, Params: &ServiceParams{}, Resources: Resources{}}}},
		{Name: "empty"}}
}

func TestCanonicalJSONIsWhatAkashHashes(t *testing.T) {
	checkCanonical(t, sampleManifest())
	checkCanonical(t, Manifest{})
	checkCanonical(t, nil)
	// omitempty drops empty lists too, not only nil ones.
	checkCanonical(t, Manifest{{Name: "g", Services: []Service{{Params: &ServiceParams{Permissions: &ServicePermissions{Read: []string{}}}}}}})
	// proxyBufferSize is omitempty: written when set, absent when 0.
	for _, size := range []uint32{0, 1, 16384, MaxProxyBufferSize, 1<<32 - 1} {
		checkCanonical(t, Manifest{{Name: "g", Services: []Service{{Expose: []ServiceExpose{{Port: 80,
			HTTPOptions: ServiceHTTPOptions{MaxBodySize: 1, NextCases: []string{"off"}, NextTries: 1, ProxyBufferSize: size}}}}}}})
	}
}

// TestProxyBufferSizeCanonicalForm: the field as Akash's manifest type writes it
// (chain-sdk go/manifest/v2beta3/httpoptions.pb.go: json:"proxyBufferSize,omitempty",
// a uint32 after nextCases), and with the keys sorted, as its version hashes it. The
// struct here copies the JSON tags of Akash's type, in Akash's field order.
func TestProxyBufferSizeCanonicalForm(t *testing.T) {
	type akashHTTPOptions struct {
		MaxBodySize     uint32   `json:"maxBodySize"`
		ReadTimeout     uint32   `json:"readTimeout"`
		SendTimeout     uint32   `json:"sendTimeout"`
		NextTries       uint32   `json:"nextTries"`
		NextTimeout     uint32   `json:"nextTimeout"`
		NextCases       []string `json:"nextCases,omitempty"`
		ProxyBufferSize uint32   `json:"proxyBufferSize,omitempty"`
	}
	tests := []struct {
		h    ServiceHTTPOptions
		want string
	}{
		{ServiceHTTPOptions{MaxBodySize: 1048576, NextCases: []string{"error", "timeout"}, NextTries: 3, ReadTimeout: 60000, SendTimeout: 60000},
			`{"maxBodySize":1048576,"nextCases":["error","timeout"],"nextTimeout":0,"nextTries":3,"readTimeout":60000,"sendTimeout":60000}`},
		{ServiceHTTPOptions{MaxBodySize: 1048576, NextCases: []string{"error", "timeout"}, NextTries: 3, ProxyBufferSize: 16384, ReadTimeout: 60000, SendTimeout: 60000},
			`{"maxBodySize":1048576,"nextCases":["error","timeout"],"nextTimeout":0,"nextTries":3,"proxyBufferSize":16384,"readTimeout":60000,"sendTimeout":60000}`},
		{ServiceHTTPOptions{MaxBodySize: 2, NextTimeout: 5, NextTries: 4, ProxyBufferSize: 4294967295, ReadTimeout: 6, SendTimeout: 7},
			`{"maxBodySize":2,"nextTimeout":5,"nextTries":4,"proxyBufferSize":4294967295,"readTimeout":6,"sendTimeout":7}`},
	}
	for _, tt := range tests {
		m := Manifest{{Name: "g", Services: []Service{{Expose: []ServiceExpose{{HTTPOptions: tt.h}}}}}}
		canonical := string(m.AppendCanonicalJSON(nil))
		_, after, _ := strings.Cut(canonical, `"httpOptions":`)
		got, _, _ := strings.Cut(after, `,"ip":`)
		if got != tt.want {
			t.Errorf("httpOptions\n got: %s\nwant: %s", got, tt.want)
		}
		h := tt.h
		raw, err := json.Marshal(akashHTTPOptions{MaxBodySize: h.MaxBodySize, ReadTimeout: h.ReadTimeout, SendTimeout: h.SendTimeout,
			NextTries: h.NextTries, NextTimeout: h.NextTimeout, NextCases: h.NextCases, ProxyBufferSize: h.ProxyBufferSize})
		if err != nil {
			t.Fatal(err)
		}
		var generic any
		if err := json.Unmarshal(raw, &generic); err != nil {
			t.Fatal(err)
		}
		sorted, err := json.Marshal(generic)
		if err != nil {
			t.Fatal(err)
		}
		if string(sorted) != tt.want {
			t.Errorf("Akash's type gives %s, want %s", sorted, tt.want)
		}
	}
}

func FuzzCanonicalString(f *testing.F) {
	for _, s := range []string{"", "a", "<>&", "\u2028", "\xff", "é\x00\x1f\"\\", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCanonical(t, Manifest{{Name: s, Services: []Service{{Name: s, Env: []string{s}}}}})
	})
}
