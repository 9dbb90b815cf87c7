package sdl

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

// base is a minimal valid SDL; tests replace parts of it.
const base = `version: "2.0"
services:
  web:
    image: nginx:1.27
    env:
      - GREETING=hello
    expose:
      - port: 80
        as: 80
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

// edit replaces old (which must occur in base exactly once) with repl.
func edit(t *testing.T, old, repl string) string {
	t.Helper()
	if strings.Count(base, old) != 1 {
		t.Fatalf("edit: %q occurs %d times in base", old, strings.Count(base, old))
	}
	return strings.Replace(base, old, repl, 1)
}

func mustParse(t *testing.T, in string) (*Result, []Warning) {
	t.Helper()
	res, ws, err := Parse([]byte(in), Options{})
	if err != nil {
		t.Fatalf("unexpected error: %v\n%s", err, in)
	}
	return res, ws
}

func TestBaseIsValid(t *testing.T) {
	res, ws := mustParse(t, base)
	if len(ws) != 0 {
		t.Errorf("warnings on the base SDL: %v", ws)
	}
	if len(res.Groups) != 1 || res.Groups[0].Name != "dcloud" || len(res.Manifest) != 1 {
		t.Fatalf("groups %+v", res.Groups)
	}
	u := res.Groups[0].Resources[0]
	if u.Resources.CPU.Units.Val != 500 || u.Resources.Memory.Size.Val != 512<<20 || u.Count != 1 {
		t.Errorf("resource unit %+v", u)
	}
	if u.Price.Denom != "uakt" || u.Price.Amount.String() != "100.000000000000000000" {
		t.Errorf("price %v", u.Price)
	}
	want, err := akashVersion(res.Manifest)
	if err != nil || hex.EncodeToString(want) != hex.EncodeToString(res.Version) {
		t.Errorf("version %x, manifest hashes to %x (%v)", res.Version, want, err)
	}
}

func TestErrorsNameThePathAndLine(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the whole error text
	}{
		{"port out of range", edit(t, "port: 80", "port: 70000"),
			"services.web.expose[0].port (line 8): port 70000 is outside 1–65535"},
		{"quoted port", edit(t, "port: 80", `port: "80"`),
			`services.web.expose[0].port (line 8): expected a whole number, found the string "80" (remove the quotes)`},
		{"memory with a B", edit(t, "size: 512Mi", "size: 512MB"),
			`profiles.compute.web.resources.memory.size (line 19): "512MB" is not a size: use a number with an optional suffix k, Ki, M, Mi, G, Gi, T, Ti, P, Pi, E or Ei (case-sensitive, no "B"), e.g. 512Mi`},
		{"unknown compute profile", edit(t, "profile: web", "profile: big"),
			`deployment.web.dcloud.profile (line 31): no compute profile named "big" (profiles.compute has: web)`},
		{"unknown top-level key", base + "extra: 1\n",
			"extra (line 33): unknown key \"extra\"; known keys: version, include, services, profiles, deployment, endpoints, reclamation"},
		{"syntax", edit(t, "image: nginx:1.27", "image: nginx: 1.27"),
			"line 4, column 17: invalid YAML: mapping values are not allowed in this context"},
		{"cpu too small", edit(t, "units: 0.5", "units: 1m"),
			"profiles.compute.web.resources.cpu.units (line 17): cpu units must be 10m–384 CPUs (10–384000 millicores), found 1 millicores"},
		{"negative price", edit(t, "amount: 100", "amount: -1"),
			`profiles.placement.dcloud.pricing.web.amount (line 27): amount -1 is negative`},
		{"bad env name", edit(t, "GREETING=hello", "1GREETING=hello"),
			`services.web.env (line 6): environment variable name "1GREETING" is invalid: letters, digits, '_', '-' and '.', not starting with a digit`},
		{"no global port", edit(t, "- global: true", "- service: web"),
			"services (line 3): no service is reachable from outside: expose at least one port with to: [{global: true}]"},
		{"unsupported version", edit(t, `version: "2.0"`, `version: "1.0"`),
			`version (line 1): unsupported SDL version "1.0": Akash reads 2.0 and 2.1`},
		{"duplicate key", edit(t, "    image: nginx:1.27\n", "    image: nginx:1.27\n    image: nginx\n"),
			`services.web.image (line 5): duplicate key "image" (first at line 4)`},
	}
	for _, tt := range tests {
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

func TestWarningsForKeysAkashIgnores(t *testing.T) {
	in := edit(t, "    image: nginx:1.27\n", "    image: nginx:1.27\n    imgae: redis\n    depends_on: [db]\n    environment: {A: b}\n")
	res, ws := mustParse(t, in)
	if res.Manifest[0].Services[0].Image != "nginx:1.27" {
		t.Errorf("image %q", res.Manifest[0].Services[0].Image)
	}
	got := make([]string, 0, len(ws))
	for _, w := range ws {
		got = append(got, w.String())
	}
	want := []string{
		`services.web.imgae (line 5): unknown key "imgae" (did you mean "image"?) is ignored, as Akash ignores it`,
		`services.web.depends_on (line 6): unknown key "depends_on" is ignored, as Akash ignores it: SDL has no start order; services start together and must retry their dependencies`,
		`services.web.environment (line 7): unknown key "environment" is ignored, as Akash ignores it: the SDL key is "env", a list of NAME=value`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	// The ignored keys do not change what is deployed: same version as without them.
	plain, _ := mustParse(t, base)
	if hex.EncodeToString(plain.Version) != hex.EncodeToString(res.Version) {
		t.Error("ignored keys changed the manifest version")
	}
	// Strict mode rejects the file, and still reports every warning.
	_, sws, err := Parse([]byte(in), Options{Strict: true})
	if err == nil || !strings.Contains(err.Error(), "--strict makes this warning an error: unknown key \"imgae\"") || !strings.Contains(err.Error(), "and 2 more") {
		t.Errorf("strict error %v", err)
	}
	if len(sws) != 3 {
		t.Errorf("strict mode returned %d warnings, want 3", len(sws))
	}
}

// TestSecondDocumentIgnoredAsAkash: Akash reads an SDL with yaml.v3's Unmarshal, which
// reads the first document only; so does Parse (unlike configuration files, where a
// second document is an error), with a warning at the line where the rest starts.
func TestSecondDocumentIgnoredAsAkash(t *testing.T) {
	plain, _ := mustParse(t, base)
	for rest, after := range map[string]int{"---\nversion: \"1.0\"\n": 0, "---\n": 0, "...\nnot: yaml: at all\n": 1} {
		res, ws := mustParse(t, base+rest)
		if hex.EncodeToString(plain.Version) != hex.EncodeToString(res.Version) {
			t.Errorf("%q after the SDL changed its manifest version", rest)
		}
		if len(ws) != 1 || ws[0].Line != strings.Count(base, "\n")+1+after || !strings.Contains(ws[0].Msg, "not part of the SDL") {
			t.Errorf("%q after the SDL: warnings %v", rest, ws)
		}
	}
}

// TestYAMLv3DecodingRules pins the yaml.v3 behaviours Akash's files depend on.
func TestYAMLv3DecodingRules(t *testing.T) {
	global := func(v string) string { return edit(t, "- global: true", "- global: "+v) }
	t.Run("YAML 1.1 booleans", func(t *testing.T) {
		for _, v := range []string{"true", "yes", "on", "Y", `"yes"`, "'on'"} {
			res, _ := mustParse(t, global(v))
			if !res.Manifest[0].Services[0].Expose[0].Global {
				t.Errorf("global: %s read as false", v)
			}
		}
		// In quotes, "true" is a string that yaml.v3 does not read as a bool.
		if _, _, err := Parse([]byte(global(`"true"`)), Options{}); err == nil || !strings.Contains(err.Error(), "expected true or false") {
			t.Errorf(`global: "true": %v`, err)
		}
	})
	t.Run("integers in other bases", func(t *testing.T) {
		for _, v := range []string{"0x50", "0o120", "0b1010000", "8_0", "+80"} {
			res, _ := mustParse(t, edit(t, "port: 80", "port: "+v))
			if p := res.Manifest[0].Services[0].Expose[0].Port; p != 80 {
				t.Errorf("port: %s read as %d", v, p)
			}
		}
	})
	t.Run("fractions are truncated with a warning", func(t *testing.T) {
		res, ws := mustParse(t, edit(t, "port: 80", "port: 80.9"))
		if p := res.Manifest[0].Services[0].Expose[0].Port; p != 80 || len(ws) != 1 || !strings.Contains(ws[0].Msg, "reads it as 80") {
			t.Errorf("port %d, warnings %v", p, ws)
		}
	})
	t.Run("CPU quantities truncate", func(t *testing.T) {
		res, _ := mustParse(t, edit(t, "units: 0.5", "units: 1.005"))
		if v := res.Groups[0].Resources[0].Resources.CPU.Units.Val; v != 1004 {
			t.Errorf("cpu 1.005 read as %d millicores, Akash reads 1004", v)
		}
	})
	t.Run("null list items are dropped", func(t *testing.T) {
		res, ws := mustParse(t, edit(t, "      - GREETING=hello\n", "      - GREETING=hello\n      - ~\n"))
		if env := res.Manifest[0].Services[0].Env; len(env) != 1 || len(ws) != 1 || ws[0].Path != "services.web.env[1]" {
			t.Errorf("env %q, warnings %v", env, ws)
		}
	})
	t.Run("an empty list stays empty, not null", func(t *testing.T) {
		res, _ := mustParse(t, edit(t, "    image: nginx:1.27\n", "    image: nginx:1.27\n    args: []\n"))
		if args := res.Manifest[0].Services[0].Args; args == nil || len(args) != 0 {
			t.Errorf("args %#v", args)
		}
	})
	t.Run("anchors, aliases and merge keys", func(t *testing.T) {
		in := strings.Replace(edit(t, "        cpu:\n          units: 0.5\n", "        cpu: &cpu\n          units: 0.5\n"),
			"  placement:\n", "    other:\n      resources:\n        <<: {cpu: *cpu, memory: {size: 1Gi}}\n        storage: {size: 2Gi}\n  placement:\n", 1)
		in = strings.Replace(in, "        web:\n          denom", "        other: {denom: uakt, amount: 5}\n        web:\n          denom", 1)
		in = strings.Replace(in, "      count: 1\n", "      count: 1\n  db:\n    dcloud: {profile: other, count: 1}\n", 1)
		in = strings.Replace(in, "services:\n", "services:\n  db: {image: redis}\n", 1)
		res, _ := mustParse(t, in)
		units := res.Groups[0].Resources
		if len(units) != 2 || units[0].Resources.CPU.Units.Val != 500 || units[0].Resources.Memory.Size.Val != 1<<30 {
			t.Fatalf("units %+v", units)
		}
	})
}

func TestHostileInput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"too large", base + "#" + strings.Repeat("x", MaxInputBytes), "the limit is 1048576 (1 MiB)"},
		{"deep nesting", "version: \"2.0\"\nx: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n", "nested more than 100 levels"},
		{"alias bomb", aliasBomb(), "aliases expand the document"},
		{"self-referencing alias", edit(t, "    env:\n      - GREETING=hello\n", "    env: &e [*e]\n"), "expected a single value, found a list"},
		{"self-merging mapping", edit(t, "  web:\n    image: nginx:1.27\n", "  web: &w\n    <<: *w\n    image: nginx:1.27\n"), "services.web (line 3): this mapping merges itself"},
		{"control character", base + "\x00", "control character 0x00 is not allowed"},
		{"not UTF-8", base + "# \xff\n", "invalid UTF-8 byte 0xff"},
		{"empty", "", "the file is empty"},
		{"a list", "- a\n", "an SDL is a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := allocatedBytes()
			_, _, err := Parse([]byte(tt.in), Options{})
			if used := allocatedBytes() - before; used > maxAllocBytes(len(tt.in)) {
				t.Errorf("allocated %d bytes for %d bytes of input, over the bound of %d", used, len(tt.in), maxAllocBytes(len(tt.in)))
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// aliasBomb is the "billion laughs" in SDL clothes: ten levels of ten-fold merges of
// aliases, under a service that is read, so that every expansion would be decoded.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("version: \"2.0\"\nservices:\n  web:\n    image: x\n    m0: &m0 {image: y}\n")
	for i := 1; i <= 9; i++ {
		p := fmt.Sprintf("*m%d", i-1)
		fmt.Fprintf(&b, "    m%d: &m%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(p+", ", 10), ", "))
	}
	b.WriteString("  api:\n    <<: *m9\n")
	return b.String()
}

func TestVersionRules(t *testing.T) {
	tests := []struct {
		version string
		v21     bool
		warn    bool
		err     bool
	}{
		{`"2.0"`, false, false, false},
		{`2.0`, false, false, false},
		{`2`, false, false, false},
		{`"v2.0.0"`, false, false, false},
		{`"2.1"`, true, false, false},
		{`2.10`, true, true, false},
		{`"3.0"`, true, true, false},
		{`"2.1.0-rc1"`, false, false, true},
		{`"1.0"`, false, false, true},
		{`"two"`, false, false, true},
		{`~`, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			_, ws, err := Parse([]byte(edit(t, `version: "2.0"`, "version: "+tt.version)), Options{})
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if err == nil && (len(ws) > 0) != tt.warn {
				t.Errorf("warnings %v", ws)
			}
		})
	}
	v, err := parseTolerantVersion(" v02.01 ")
	if err != nil || !v.v21() || v.v20() {
		t.Errorf("v02.01: %+v %v", v, err)
	}
}

func TestSDL21SharesResourceUnits(t *testing.T) {
	in := strings.Replace(edit(t, `version: "2.0"`, `version: "2.1"`), "services:\n", "services:\n  api:\n    image: api\n    expose: [{port: 8080, to: [{global: true}]}]\n", 1)
	in = strings.Replace(in, "      count: 1\n", "      count: 1\n  api:\n    dcloud: {profile: web, count: 2}\n", 1)
	res, _ := mustParse(t, in)
	units := res.Groups[0].Resources
	if len(units) != 1 || units[0].Count != 3 || len(units[0].Resources.Endpoints) != 2 {
		t.Fatalf("2.1 should merge both services into one unit of count 3: %+v", units)
	}
	// The same file as 2.0 gets one unit per service.
	res20, _ := mustParse(t, strings.Replace(in, `version: "2.1"`, `version: "2.0"`, 1))
	if len(res20.Groups[0].Resources) != 2 {
		t.Errorf("2.0 units: %+v", res20.Groups[0].Resources)
	}
}

func TestManifestJSONIsCanonical(t *testing.T) {
	// The version hash is over JSON with sorted keys; market's field order must give it.
	for _, c := range loadCorpus(t) {
		res, _, err := Parse(c.input, Options{})
		if err != nil {
			continue
		}
		if err := checkSortedKeys(res.Manifest); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := checkSortedKeys(res.Groups); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	var m market.Manifest
	if err := checkSortedKeys(m); err != nil {
		t.Fatal(err)
	}
}
