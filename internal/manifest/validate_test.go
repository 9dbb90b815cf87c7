package manifest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

// corpusCase is one valid SDL of the conformance corpus as Akash's own SDL package
// turned it into ledger groups and a manifest.
type corpusCase struct {
	name     string
	groups   []market.GroupSpec
	manifest []byte
	version  []byte
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("../sdl/testdata/corpus/*/expected.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus under ../sdl/testdata/corpus (%v)", err)
	}
	var out []corpusCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var exp struct {
			Error           string          `json:"error"`
			Groups          json.RawMessage `json:"groups"`
			Manifest        json.RawMessage `json:"manifest"`
			ManifestVersion string          `json:"manifestVersion"`
		}
		if err := json.Unmarshal(data, &exp); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if exp.Error != "" {
			continue
		}
		c := corpusCase{name: filepath.Base(filepath.Dir(f)), manifest: exp.Manifest}
		if err := json.Unmarshal(exp.Groups, &c.groups); err != nil {
			t.Fatalf("%s: groups: %v", c.name, err)
		}
		if c.version, err = hex.DecodeString(exp.ManifestVersion); err != nil {
			t.Fatalf("%s: manifestVersion: %v", c.name, err)
		}
		out = append(out, c)
	}
	return out
}

// TestCorpusManifestsAccepted: every manifest Akash's SDL package built, as a tenant
// tool would send it, decodes, validates, has the deployment's version and fits the
// ledger's groups.
func TestCorpusManifestsAccepted(t *testing.T) {
	cases := loadCorpus(t)
	for _, c := range cases {
		m, err := Decode(c.manifest)
		if err != nil {
			t.Errorf("%s: decode: %v", c.name, err)
			continue
		}
		if err := Validate(m); err != nil {
			t.Errorf("%s: validate: %v", c.name, err)
			continue
		}
		if err := CheckVersion(m, c.version); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := CheckDeployment(m, c.groups); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if len(cases) < 100 {
		t.Fatalf("only %d valid corpus cases", len(cases))
	}
}

// corpusManifest is a multi-service case of the corpus, decoded afresh.
func corpusManifest(t *testing.T, name string) (market.Manifest, []market.GroupSpec) {
	t.Helper()
	for _, c := range loadCorpus(t) {
		if c.name == name {
			m, err := Decode(c.manifest)
			if err != nil {
				t.Fatal(err)
			}
			return m, c.groups
		}
	}
	t.Fatalf("no corpus case %s", name)
	return nil, nil
}

func TestRejections(t *testing.T) {
	const base = "aa-CodiMD_deploy"
	cases := []struct {
		name   string
		edit   func(m market.Manifest, g []market.GroupSpec)
		path   string // where the error points
		substr string
	}{
		{"no groups", func(market.Manifest, []market.GroupSpec) {}, "", ""}, // replaced below
		{"services unsorted", func(m market.Manifest, _ []market.GroupSpec) {
			s := m[0].Services
			s[0], s[1] = s[1], s[0]
		}, "[0].services[1].name", "not sorted"},
		{"bad service name", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Name = "Web_1" }, "[0].services[0].name", "lowercase"},
		{"no image", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Image = " " }, "[0].services[0].image", "no image"},
		{"bad env", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Env = []string{"1X=2"} }, "[0].services[0].env[0]", "environment variable"},
		{"port 0", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Expose[0].Port = 0 }, "[0].services[0].expose[0].port", "outside"},
		{"protocol", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Expose[0].Proto = "SCTP" }, "[0].services[0].expose[0].proto", "TCP or UDP"},
		{"bad hostname", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[0].Expose[0].Hosts = []string{"Bad_Host.example.com"}
		}, "[0].services[0].expose[0].hosts[0]", "not a valid"},
		{"hostname twice", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[0].Expose[0].Hosts = []string{"a.example.com"}
			m[0].Services[1].Expose[0].Hosts = []string{"a.example.com"}
		}, "[0].services[1].expose[0].hosts[0]", "accepted twice"},
		{"cpu differs", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Resources.CPU.Units.Val++ }, "[0].services[0].resources.cpu", "cpu"},
		{"memory differs", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[1].Resources.Memory.Size.Val *= 2 }, "[0].services[1].resources.memory", "memory"},
		{"storage differs", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Resources.Storage[0].Size.Val++ }, "[0].services[0].resources.storage", "storage"},
		{"gpu added", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[0].Resources.GPU = &market.GPU{Units: market.ResourceValue{Val: 1}}
		}, "[0].services[0].resources.gpu", "gpu"},
		{"count over", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Count = 5 }, "[0].services[0].count", "has 1 left"},
		{"count under", func(_ market.Manifest, g []market.GroupSpec) { g[0].Resources[0].Count = 2 }, "[0].services", "no service runs"},
		{"unknown unit", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Resources.ID = 99 }, "[0].services[0].resources.id", "does not have"},
		{"endpoint over-used", func(m market.Manifest, _ []market.GroupSpec) {
			e := m[0].Services[0].Expose[0]
			e.Port++
			m[0].Services[0].Expose = append(m[0].Services[0].Expose, e)
		}, "[0].services[0].expose[1]", "endpoint"},
		{"nothing global", func(m market.Manifest, _ []market.GroupSpec) {
			for i := range m[0].Services {
				for j := range m[0].Services[i].Expose {
					m[0].Services[i].Expose[j].Global = false
				}
			}
		}, "", "reachable from outside"},
		{"unit id 0", func(m market.Manifest, _ []market.GroupSpec) { m[0].Services[0].Resources.ID = 0 }, "[0].services[0].resources.id", "id 0"},
		{"group renamed", func(m market.Manifest, _ []market.GroupSpec) { m[0].Name = "other" }, "[0].name", "no group"},
		{"proxy buffer over 1 MiB", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].HTTPOptions.ProxyBufferSize = market.MaxProxyBufferSize + 1
		}, "[0].services[1].expose[0].httpOptions.proxyBufferSize", "proxy buffer size 1048577 is over the limit of 1048576 bytes (1 MiB)"},
		// The options reach the ingress controller's configuration: nothing but the
		// known next cases may get there.
		{"next case injected", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].HTTPOptions.NextCases = []string{"error;\n more_set_headers x"}
		}, "[0].services[1].expose[0].httpOptions", "is not one of error, timeout"},
		{"next case off with others", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].HTTPOptions.NextCases = []string{"off", "error"}
		}, "[0].services[1].expose[0].httpOptions", `"off" cannot be combined`},
		{"read timeout over 60 s", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].HTTPOptions.ReadTimeout = 60001
		}, "[0].services[1].expose[0].httpOptions", "read timeout 60001 is over the limit"},
		{"body over 100 MiB", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].HTTPOptions.MaxBodySize = 100<<20 + 1
		}, "[0].services[1].expose[0].httpOptions", "max body size"},
		{"wildcard on a top-level domain", func(m market.Manifest, _ []market.GroupSpec) {
			m[0].Services[1].Expose[0].Hosts = []string{"*.com"}
		}, "[0].services[1].expose[0].hosts[0]", "not a valid lowercase DNS name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, groups := corpusManifest(t, base)
			if tc.name == "no groups" {
				m = market.Manifest{}
				tc.substr = "no groups"
			} else {
				tc.edit(m, groups)
			}
			err := Validate(m)
			if err == nil {
				err = CheckDeployment(m, groups)
			}
			var me *Error
			if !errors.As(err, &me) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want a manifest error", err)
			}
			if me.Path != tc.path || !strings.Contains(me.Msg, tc.substr) {
				t.Fatalf("got %q at %q, want %q at %q", me.Msg, me.Path, tc.substr, tc.path)
			}
		})
	}
}

// TestProxyBufferSizeManifest: a manifest from Akash's current tools may carry
// httpOptions.proxyBufferSize (chain-sdk go/manifest/v2beta3, "proxyBufferSize,omitempty");
// it decodes, validates and keeps its version, which covers the field.
func TestProxyBufferSizeManifest(t *testing.T) {
	m, groups := corpusManifest(t, "aa-CodiMD_deploy")
	plain := m.Version()
	m[0].Services[1].Expose[0].HTTPOptions.ProxyBufferSize = market.MaxProxyBufferSize
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"proxyBufferSize":1048576`) {
		t.Fatalf("manifest JSON without the field: %s", raw)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := Validate(got); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if err := CheckDeployment(got, groups); err != nil {
		t.Fatal(err)
	}
	if got[0].Services[1].Expose[0].HTTPOptions.ProxyBufferSize != market.MaxProxyBufferSize {
		t.Errorf("decoded %+v", got[0].Services[1].Expose[0].HTTPOptions)
	}
	v := got.Version()
	if err := CheckVersion(got, v); err != nil {
		t.Fatal(err)
	}
	if err := CheckVersion(got, plain); err == nil {
		t.Error("the version without the proxy buffer size also matches")
	}
}

func TestVersionMismatch(t *testing.T) {
	m, _ := corpusManifest(t, "aa-CodiMD_deploy")
	v := m.Version()
	if err := CheckVersion(m, v); err != nil {
		t.Fatal(err)
	}
	m[0].Services[0].Env = append(m[0].Services[0].Env, "X=1")
	if err := CheckVersion(m, v); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not the deployment's version") {
		t.Fatalf("changed manifest: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "end of input"},
		{`{}`, "JSON array"},
		{`null`, "null"},
		{`[{"name":"a","services":[],"bogus":1}]`, "unknown field"},
		{`[{"name":1}]`, "got a JSON number"},
		{`[] []`, "after the manifest"},
		{`[{"name":"a"`, "end of input"},
		{strings.Repeat(" ", MaxBytes+1), "more than"},
	} {
		_, err := Decode([]byte(tc.in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%.40q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.manifest)
	}
	f.Add([]byte(`[{"name":"a","services":[{"name":"x"}]}]`))
	f.Add([]byte(`[{"name":"a","services":[{"name":"x","expose":[{"port":80,"httpOptions":{"maxBodySize":1048576,"proxyBufferSize":32768}}]}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("decode error not marked invalid: %v", err)
			}
			return
		}
		// Whatever decodes validates without panicking, and a valid manifest
		// survives a round trip unchanged.
		if Validate(m) != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if fmt.Sprintf("%x", again.Version()) != fmt.Sprintf("%x", m.Version()) {
			t.Fatal("version changed across a round trip")
		}
	})
}
