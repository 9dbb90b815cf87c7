package yaml

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

type decodeTarget struct {
	Name    string            `yaml:"name"`
	Count   uint32            `yaml:"count"`
	Ratio   float64           `yaml:"ratio"`
	On      bool              `yaml:"on"`
	Tags    []string          `yaml:"tags"`
	Rates   map[string]string `yaml:"rates"`
	Inner   *decodeInner      `yaml:"inner"`
	Keep    string            `yaml:"keep"`
	Every   time.Duration     `yaml:"every"`
	private string
}

type decodeInner struct {
	Items []decodeItem `yaml:"items"`
}

type decodeItem struct {
	Key   string `yaml:"key"`
	Value int    `yaml:"value"`
}

func TestDecode(t *testing.T) {
	v := decodeTarget{Keep: "default"}
	err := Decode([]byte(`
name: web
count: 3
ratio: 0.5
on: yes
tags: [a, b]
rates: {cpu: "0.1", "*": "2"}
inner:
  items:
    - {key: k, value: -4}
every: 1m30s
`), &v)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "web" || v.Count != 3 || v.Ratio != 0.5 || !v.On || len(v.Tags) != 2 || v.Rates["*"] != "2" ||
		v.Inner == nil || v.Inner.Items[0].Value != -4 || v.Keep != "default" || v.private != "" || v.Every != 90*time.Second {
		t.Fatalf("%+v", v)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"naem: x", "line 1: naem: unknown key (known here: count, every, inner, keep, name, on, rates, ratio, tags)"},
		{"count: -1", "line 1: count: \"-1\" is not a non-negative whole number"},
		{"count: 99999999999", "count: \"99999999999\" is not a non-negative whole number that fits (32 bits)"},
		{"inner:\n  items:\n    - {key: k, value: x}", "line 3: inner.items[0].value: \"x\" is not a whole number"},
		{"inner:\n  items:\n    - {kye: k}", "line 3: inner.items[0].kye: unknown key"},
		{"tags: a", "line 1: tags: want a list, got a scalar"},
		{"name: [a]", "line 1: name: want a single value, got a sequence"},
		{"on: maybe", "on: \"maybe\" is not true or false"},
		{"every: 10", "line 1: every: \"10\" is not a duration (such as 30s, 5m or 1h30m)"},
		{"rates: {a: 1, a: 2}", "line 1: rates.a: listed twice"},
		{"- a", "(top level): want a mapping"},
	} {
		var v decodeTarget
		err := Decode([]byte(tc.doc), &v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestDecodeOneDocument: a configuration file holds one document. Content after it is
// an error naming its line, never silently dropped. Document markers that start or end
// the one document, and empty documents after it (a "---" followed by nothing, or by
// comments only: YAML reads it as a null document), hold nothing and are allowed. A
// directive after the first document counts as content.
func TestDecodeOneDocument(t *testing.T) {
	for _, tc := range []struct{ doc, name, err string }{
		{doc: "name: a\n", name: "a"},
		{doc: "---\nname: a\n", name: "a"},
		{doc: "# config\n---\nname: a\n...\n", name: "a"},
		{doc: "name: a\n---\n", name: "a"},
		{doc: "name: a\n---\n# nothing more\n---\n...\n", name: "a"},
		{doc: "name: a\n...\n", name: "a"},
		{doc: "name: a\n---\nname: b\n", err: "line 3: a second YAML document"},
		{doc: "name: a\n---\n\n# b follows\nname: b\n", err: "line 5: a second YAML document"},
		{doc: "name: a\n...\nname: b\n", err: "line 3: a second YAML document"},
		{doc: "name: a\n--- ~\n", err: "line 2: a second YAML document"},
		{doc: "---\n---\nname: b\n", err: "line 3: a second YAML document"},
		{doc: "name: a\n---\n%YAML 1.1\n---\n", err: "line 3: a second YAML document"},
		{doc: "  name: a\nkeep: b\n", err: "line 2: a second YAML document (or text indented less than the first line)"},
	} {
		v := decodeTarget{Name: "default"}
		err := Decode([]byte(tc.doc), &v)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.err == "" && v.Name != tc.name:
			t.Errorf("%q: name %q, want %q", tc.doc, v.Name, tc.name)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one starting %q", tc.doc, err, tc.err)
		}
	}
}

// FuzzDecode: configuration files are outside input; decoding never panics, and what
// decodes once decodes the same way again.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"name: web\ncount: 3\n", "inner: {items: [{key: a, value: 1}]}", "rates: {a: b}", "tags: [x, y]", "- a", "&a x: *a",
		"name: a\n---\nname: b\n", "name: a\n---\n# c\n...\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var a, b decodeTarget
		errA := Decode([]byte(doc), &a)
		errB := Decode([]byte(doc), &b)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("%q: decoded differently: %v / %v", doc, errA, errB)
		}
	})
}

// size is a byte count written with a unit ("10Gi"): a TextUnmarshaler and
// TextMarshaler, as typed settings are.
type size int64

func (s *size) UnmarshalText(b []byte) error {
	n, ok := strings.CutSuffix(string(b), "Gi")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 0 {
		return fmt.Errorf("%q is not a size in Gi (such as 10Gi)", b)
	}
	*s = size(v << 30)
	return nil
}

func (s size) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatInt(int64(s)>>30, 10) + "Gi"), nil
}

// span is a struct read from its text ("2-5"), as Quantity-like settings are.
type span struct{ from, to int }

func (s *span) UnmarshalText(b []byte) error {
	a, z, ok := strings.Cut(string(b), "-")
	from, err1 := strconv.Atoi(a)
	to, err2 := strconv.Atoi(z)
	if !ok || err1 != nil || err2 != nil || from > to {
		return fmt.Errorf("%q is not a span (such as 2-5)", b)
	}
	*s = span{from, to}
	return nil
}

func (s span) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "%d-%d", s.from, s.to), nil }

type textTarget struct {
	Disk  size            `yaml:"disk"`
	Disks map[string]size `yaml:"disks"`
	Extra *size           `yaml:"extra"`
	Kept  size            `yaml:"kept"`
	Span  span            `yaml:"span"`
}

// TestDecodeTextUnmarshaler: a setting's own type reads its text, in structs, maps and
// behind pointers; its error is reported with the line and the key's path; Encode
// writes it back as its text.
func TestDecodeTextUnmarshaler(t *testing.T) {
	in := "disk: 10Gi\ndisks:\n  a: 1Gi\nextra: 2Gi\nspan: 2-5\n"
	got := textTarget{Kept: 7 << 30}
	if err := Decode([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	if got.Disk != 10<<30 || got.Disks["a"] != 1<<30 || got.Extra == nil || *got.Extra != 2<<30 || got.Kept != 7<<30 || got.Span != (span{2, 5}) {
		t.Fatalf("decoded %+v", got)
	}
	err := Decode([]byte("disks:\n  a: 1Gi\n  b: lots\n"), &textTarget{})
	if err == nil || err.Error() != `line 3: disks.b: "lots" is not a size in Gi (such as 10Gi)` {
		t.Fatalf("bad size: %v", err)
	}
	// A struct that reads its text takes a single value, not a mapping of its fields.
	err = Decode([]byte("span:\n  from: 2\n"), &textTarget{})
	if err == nil || err.Error() != "line 2: span: want a single value, got a mapping" {
		t.Fatalf("a mapping for a text value: %v", err)
	}
	out, err := Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	var back textTarget
	if err := Decode(out, &back); err != nil || back.Disk != got.Disk || back.Disks["a"] != got.Disks["a"] || *back.Extra != *got.Extra || back.Kept != got.Kept || back.Span != got.Span {
		t.Fatalf("round trip through\n%s: %+v, %v", out, back, err)
	}
	if !strings.Contains(string(out), "disk: 10Gi") {
		t.Errorf("encoded as its text? %s", out)
	}
}
