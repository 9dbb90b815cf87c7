package yaml

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type encInner struct {
	Name  string            `yaml:"name"`
	Rates map[string]string `yaml:"rates"`
}

type encConfig struct {
	Text     string        `yaml:"text"`
	Flag     bool          `yaml:"flag"`
	N        int           `yaml:"n"`
	U        uint32        `yaml:"u"`
	F        float64       `yaml:"f"`
	Whole    float64       `yaml:"whole"`
	Wait     time.Duration `yaml:"wait"`
	List     []string      `yaml:"list"`
	Empty    []string      `yaml:"empty"`
	Kept     []string      `yaml:"kept"`
	Inner    encInner      `yaml:"inner"`
	Items    []encInner    `yaml:"items"`
	Ptr      *encInner     `yaml:"ptr"`
	NilPtr   *encInner     `yaml:"nil_ptr"`
	Skipped  string        `yaml:"-"`
	internal string
}

// TestEncodeRoundTrip: what Encode writes, Decode reads back to the same value over
// the same defaults — strings that look like other types or YAML syntax included — and
// a nil list is left out, so that it keeps its default.
func TestEncodeRoundTrip(t *testing.T) {
	defaults := func() encConfig {
		return encConfig{Kept: []string{"default"}, Inner: encInner{Rates: map[string]string{"*": "1"}}}
	}
	tricky := []string{"", "yes", "no", "true", "1", "0x10", "1e3", "~", "null", "a: b", "#x", "- y", "[z]", "{w}", "'q'", `"d"`, "line\nbreak", " lead", "trail ", "tab\there", "ünï", "*alias", "&anchor", "!tag", "%dir", "@at", "`tick`", "|", ">"}
	for _, s := range tricky {
		v := defaults()
		v.Text, v.Flag, v.N, v.U, v.F, v.Whole, v.Wait = s, true, -42, 7, 0.0002, 100, 90*time.Second
		v.List, v.Empty, v.Kept = []string{s, "x"}, []string{}, nil
		v.Inner.Rates = map[string]string{"*": "1", s: s, "beta3": "0.01"}
		v.Items = []encInner{{Name: s}, {Name: "b", Rates: map[string]string{}}}
		v.Ptr = &encInner{Name: s}
		v.Skipped, v.internal = "not written", "not written"
		b, err := Encode(&v)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		got := defaults()
		if err := Decode(b, &got); err != nil {
			t.Fatalf("%q: decode: %v\n%s", s, err, b)
		}
		want := v
		want.Kept = []string{"default"} // nil: left out, the default stays
		want.Skipped, want.internal = "", ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: round trip\n got %+v\nwant %+v\n%s", s, got, want, b)
		}
		if strings.Contains(string(b), "!!") || strings.Contains(string(b), "nil_ptr") || strings.Contains(string(b), "kept") {
			t.Fatalf("%q: nil values written:\n%s", s, b)
		}
	}
	if _, err := Encode("a string"); err == nil {
		t.Fatal("a string encoded as a document")
	}
	if _, err := Encode(struct {
		C chan int `yaml:"c"`
	}{}); err == nil || !strings.Contains(err.Error(), "c: cannot encode") {
		t.Fatalf("a channel: %v", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 90 * time.Second: "1m30s", 5 * time.Minute: "5m", time.Hour: "1h", 90 * time.Minute: "1h30m",
		25 * time.Hour: "25h", 100 * time.Millisecond: "100ms", time.Hour + time.Second: "1h0m1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("%v: read back as %v, %v", d, back, err)
		}
	}
}
