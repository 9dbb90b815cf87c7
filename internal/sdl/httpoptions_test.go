package sdl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// withHTTPOptions is base with http_options (lines of YAML, indented under it) on its
// port: http_options is at line 10, its first option at line 11.
func withHTTPOptions(t *testing.T, opts ...string) string {
	t.Helper()
	block := "        as: 80\n        http_options:\n"
	for _, o := range opts {
		block += "          " + o + "\n"
	}
	return edit(t, "        as: 80\n", block)
}

// TestProxyBufferSize: http_options.proxy_buffer_size is a whole number of bytes,
// 0–1 MiB, read as yaml.v3 reads a uint32 on Akash (chain-sdk go/sdl/v2.go); when it
// is absent or 0 the manifest has 0, with no default written in.
func TestProxyBufferSize(t *testing.T) {
	valid := []struct {
		name string
		in   string
		want uint32
		warn string // a warning's whole text, if any
	}{
		{"absent", base, 0, ""},
		{"no http_options value", withHTTPOptions(t, "max_body_size: 2048"), 0, ""},
		{"16 KiB", withHTTPOptions(t, "proxy_buffer_size: 16384"), 16384, ""},
		{"at the limit", withHTTPOptions(t, "proxy_buffer_size: 1048576"), 1 << 20, ""},
		{"explicit 0", withHTTPOptions(t, "proxy_buffer_size: 0"), 0, ""},
		{"null", withHTTPOptions(t, "proxy_buffer_size: null"), 0, ""},
		{"hexadecimal", withHTTPOptions(t, "proxy_buffer_size: 0x8000"), 32768, ""},
		{"with the other options", withHTTPOptions(t, "max_body_size: 2048", "proxy_buffer_size: 8192", "read_timeout: 1000"), 8192, ""},
		{"fraction", withHTTPOptions(t, "proxy_buffer_size: 4096.5"), 4096,
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): 4096.5 is not a whole number; Akash reads it as 4096"},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			res, ws := mustParse(t, tt.in)
			h := res.Manifest[0].Services[0].Expose[0].HTTPOptions
			if h.ProxyBufferSize != tt.want {
				t.Errorf("proxy buffer size %d, want %d", h.ProxyBufferSize, tt.want)
			}
			var got []string
			for _, w := range ws {
				got = append(got, w.String())
			}
			if strings.Join(got, "\n") != tt.warn {
				t.Errorf("warnings %q, want %q", got, tt.warn)
			}
		})
	}

	invalid := []struct {
		name string
		in   string
		want string // the whole error text
	}{
		{"over the limit", withHTTPOptions(t, "proxy_buffer_size: 1048577"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): proxy_buffer_size 1048577 is over the limit of 1048576 bytes (1 MiB)"},
		{"over the limit, after other options", withHTTPOptions(t, "next_tries: 2", "proxy_buffer_size: 2097152"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 12): proxy_buffer_size 2097152 is over the limit of 1048576 bytes (1 MiB)"},
		{"negative", withHTTPOptions(t, "proxy_buffer_size: -1"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): -1 is outside 0–4294967295"},
		{"over 32 bits", withHTTPOptions(t, "proxy_buffer_size: 4294967296"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): 4294967296 is outside 0–4294967295"},
		{"a size with a unit", withHTTPOptions(t, "proxy_buffer_size: 16k"),
			`services.web.expose[0].http_options.proxy_buffer_size (line 11): expected a whole number, found "16k"`},
		{"quoted", withHTTPOptions(t, `proxy_buffer_size: "16384"`),
			`services.web.expose[0].http_options.proxy_buffer_size (line 11): expected a whole number, found the string "16384" (remove the quotes)`},
		{"a list", withHTTPOptions(t, "proxy_buffer_size: [16384]"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): expected a whole number, found a list"},
		{"a boolean", withHTTPOptions(t, "proxy_buffer_size: true"),
			"services.web.expose[0].http_options.proxy_buffer_size (line 11): expected a whole number, found \"true\""},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.in), Options{})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}

// TestProxyBufferSizeIsAKnownKey: the key is read, not warned about as one Akash
// ignores; a near-miss is suggested.
func TestProxyBufferSizeIsAKnownKey(t *testing.T) {
	_, ws := mustParse(t, withHTTPOptions(t, "proxy_buffer_size: 16384"))
	if len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
	_, ws = mustParse(t, withHTTPOptions(t, "proxy_bufer_size: 16384"))
	if len(ws) != 1 || !strings.Contains(ws[0].Msg, `did you mean "proxy_buffer_size"?`) {
		t.Errorf("warnings for a misspelling: %v", ws)
	}
}

// small is a one-service SDL whose manifest's canonical JSON is written out by hand in
// TestProxyBufferSizeVersion.
const small = `version: "2.0"
services:
  web:
    image: nginx:1.27
    expose:
      - port: 80
        to:
          - global: true
profiles:
  compute:
    web:
      resources:
        cpu:
          units: 0.5
        memory:
          size: 512Mi
        storage:
          size: 1Gi
  placement:
    dcloud:
      pricing:
        web:
          denom: uakt
          amount: 100
deployment:
  web:
    dcloud:
      profile: web
      count: 1
`

// TestProxyBufferSizeVersion pins the field's canonical form, which the manifest
// version hashes. Akash's manifest type has the JSON tag "proxyBufferSize,omitempty"
// (chain-sdk go/manifest/v2beta3/httpoptions.pb.go) and the version is the sha256 of
// the manifest's encoding/json output with its keys sorted (Manifest.Version, Cosmos
// SDK SortJSON): unset, the key is absent and the version is what it was before the
// field existed; set, it sorts between nextTries and readTimeout. The JSON below is
// written by hand from those rules, and the hashes are `printf %s JSON | sha256sum`.
func TestProxyBufferSizeVersion(t *testing.T) {
	const canonical = `[{"name":"dcloud","services":[{"args":null,"command":null,"count":1,"credentials":null,"env":null,` +
		`"expose":[{"endpointSequenceNumber":0,"externalPort":0,"global":true,"hosts":null,` +
		`"httpOptions":{"maxBodySize":1048576,"nextCases":["error","timeout"],"nextTimeout":0,"nextTries":3,%s"readTimeout":60000,"sendTimeout":60000},` +
		`"ip":"","port":80,"proto":"TCP","service":""}],"image":"nginx:1.27","name":"web",` +
		`"resources":{"cpu":{"units":{"val":"500"}},"endpoints":[{"sequence_number":0}],"gpu":{"units":{"val":"0"}},"id":1,` +
		`"memory":{"size":{"val":"536870912"}},"storage":[{"name":"default","size":{"val":"1073741824"}}]}}]}]`
	withPBS := func(v string) string {
		return strings.Replace(small, "        to:\n", "        http_options:\n          proxy_buffer_size: "+v+"\n        to:\n", 1)
	}
	tests := []struct {
		name, in, field, version string
	}{
		{"absent", small, "", "eec1ac5543b530cb0a7a9f4650060201ca54c39fe36c5b68381ae756e5d4895d"},
		{"0 is absent", withPBS("0"), "", "eec1ac5543b530cb0a7a9f4650060201ca54c39fe36c5b68381ae756e5d4895d"},
		{"32 KiB", withPBS("32768"), `"proxyBufferSize":32768,`, "6e2bd45d05c934227f7818f272332fea94912204118de3e97cf8fb32ecd90203"},
		{"1 MiB", withPBS("1048576"), `"proxyBufferSize":1048576,`, "a2d8d50a1123486e56525e3d5733e187a573bbadd507b04d0ae425f4be011767"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := mustParse(t, tt.in)
			want := strings.Replace(canonical, "%s", tt.field, 1)
			if got := string(res.Manifest.AppendCanonicalJSON(nil)); got != want {
				t.Errorf("canonical JSON\n got: %s\nwant: %s", got, want)
			}
			if sum := sha256.Sum256([]byte(want)); hex.EncodeToString(sum[:]) != tt.version {
				t.Fatalf("the test's own JSON hashes to %x, not %s", sum, tt.version)
			}
			if got := hex.EncodeToString(res.Version); got != tt.version {
				t.Errorf("version %s, want %s", got, tt.version)
			}
			if v, err := akashVersion(res.Manifest); err != nil || hex.EncodeToString(v) != tt.version {
				t.Errorf("encoding/json + sorted keys give %x (%v), want %s", v, err, tt.version)
			}
		})
	}
}

// TestProxyBufferSizeUnderTo: http_options under "to" are read and checked for type,
// but have no effect on Akash (it reads only the expose entry's), so neither does
// proxy_buffer_size there, whatever its value.
func TestProxyBufferSizeUnderTo(t *testing.T) {
	in := edit(t, "          - global: true\n", "          - global: true\n            http_options:\n              proxy_buffer_size: 2097152\n")
	res, ws := mustParse(t, in)
	if got := res.Manifest[0].Services[0].Expose[0].HTTPOptions.ProxyBufferSize; got != 0 {
		t.Errorf("proxy buffer size %d from http_options under to", got)
	}
	if len(ws) != 1 || !strings.Contains(ws[0].Msg, "no effect on Akash") {
		t.Errorf("warnings %v", ws)
	}
	plain, _ := mustParse(t, base)
	if hex.EncodeToString(plain.Version) != hex.EncodeToString(res.Version) {
		t.Error("http_options under to changed the version")
	}
}
