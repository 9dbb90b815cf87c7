package sdl

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// corpusCase is one folder of testdata/corpus: an SDL file and what Akash's own SDL
// package (pkg.akt.dev/go/sdl) makes of it.
type corpusCase struct {
	name     string
	input    []byte
	expected struct {
		Error           string          `json:"error"`
		Groups          json.RawMessage `json:"groups"`
		Manifest        json.RawMessage `json:"manifest"`
		ManifestVersion string          `json:"manifestVersion"`
		Reclamation     json.RawMessage `json:"reclamation"`
	}
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	dirs, err := filepath.Glob("testdata/corpus/*/input.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no corpus cases under testdata/corpus (%v)", err)
	}
	sort.Strings(dirs)
	cases := make([]corpusCase, 0, len(dirs))
	for _, in := range dirs {
		c := corpusCase{name: filepath.Base(filepath.Dir(in))}
		if c.input, err = os.ReadFile(in); err != nil {
			t.Fatal(err)
		}
		exp, err := os.ReadFile(filepath.Join(filepath.Dir(in), "expected.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(exp, &c.expected); err != nil {
			t.Fatalf("%s: expected.json: %v", c.name, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// sameJSON compares two JSON documents as values (key order and spacing do not count;
// null, [] and a missing key do).
func sameJSON(a, b []byte) (bool, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return false, err
	}
	return reflect.DeepEqual(va, vb), nil
}

// check returns why our result for c differs from Akash's, or "".
func (c corpusCase) check() string {
	res, _, err := Parse(c.input, Options{})
	switch {
	case c.expected.Error != "" && err == nil:
		return fmt.Sprintf("accepted; Akash rejects it: %s", c.expected.Error)
	case c.expected.Error != "":
		return ""
	case err != nil:
		return fmt.Sprintf("rejected (%v); Akash accepts it", err)
	}
	for _, part := range []struct {
		name     string
		ours     any
		expected json.RawMessage
	}{{"groups", res.Groups, c.expected.Groups}, {"manifest", res.Manifest, c.expected.Manifest}} {
		ours, err := json.Marshal(part.ours)
		if err != nil {
			return err.Error()
		}
		if same, err := sameJSON(ours, part.expected); err != nil || !same {
			return fmt.Sprintf("%s differ (%v):\n ours:  %s\n akash: %s", part.name, err, ours, compact(part.expected))
		}
	}
	if v := hex.EncodeToString(res.Version); v != c.expected.ManifestVersion {
		return fmt.Sprintf("version %s, Akash's %s", v, c.expected.ManifestVersion)
	}
	var ours []byte
	if res.Reclamation != nil {
		ours, _ = json.Marshal(res.Reclamation)
	}
	if (len(ours) == 0) != (len(c.expected.Reclamation) == 0) {
		return fmt.Sprintf("reclamation %s, Akash's %s", ours, c.expected.Reclamation)
	}
	if len(ours) > 0 {
		if same, err := sameJSON(ours, c.expected.Reclamation); err != nil || !same {
			return fmt.Sprintf("reclamation %s, Akash's %s", ours, c.expected.Reclamation)
		}
	}
	return ""
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

func TestConformanceWithAkash(t *testing.T) {
	cases := loadCorpus(t)
	agree, accepted := 0, 0
	for _, c := range cases {
		if d := c.check(); d != "" {
			t.Errorf("%s: %s", c.name, d)
			continue
		}
		agree++
		if c.expected.Error == "" {
			accepted++
		}
	}
	t.Logf("conformance: %d/%d corpus files give Akash's result (%d accepted with identical groups, manifest and version; %d rejected)",
		agree, len(cases), accepted, agree-accepted)
}
