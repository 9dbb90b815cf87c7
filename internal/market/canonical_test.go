package market

import (
	"bytes"
	"encoding/json"
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
}

func FuzzCanonicalString(f *testing.F) {
	for _, s := range []string{"", "a", "<>&", "\u2028", "\xff", "é\x00\x1f\"\\", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCanonical(t, Manifest{{Name: s, Services: []Service{{Name: s, Env: []string{s}}}}})
	})
}
