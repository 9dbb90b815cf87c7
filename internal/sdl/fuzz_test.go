package sdl

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary input to the SDL reader. It must never panic, must fail
// only with an *Error, and what it accepts must be consistent: the same result twice,
// canonical JSON, a version that is the manifest's hash, and a manifest that reads back
// from its own JSON unchanged. (Run: go test ./internal/sdl -fuzz FuzzParse.)
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(aliasBomb()))
	cases := loadCorpus(f)
	for i := range cases {
		f.Add(cases[i].input)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, ws, err := Parse(data, Options{})
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if se.Msg == "" {
				t.Fatal("error without a message")
			}
			return
		}
		for _, w := range ws {
			if w.Msg == "" {
				t.Fatal("warning without a message")
			}
		}
		again, _, err := Parse(data, Options{})
		if err != nil || !bytes.Equal(again.Version, res.Version) {
			t.Fatalf("second parse differs: %v", err)
		}
		if err := checkSortedKeys(res.Manifest); err != nil {
			t.Fatal(err)
		}
		if err := checkSortedKeys(res.Groups); err != nil {
			t.Fatal(err)
		}
		v, err := akashVersion(res.Manifest)
		if err != nil || !bytes.Equal(v, res.Version) {
			t.Fatalf("version %s is not the manifest's hash as Akash computes it, %s (%v)", hex.EncodeToString(res.Version), hex.EncodeToString(v), err)
		}
		raw, err := json.Marshal(res.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		var back []json.RawMessage
		if err := json.Unmarshal(raw, &back); err != nil || len(back) != len(res.Manifest) || len(res.Groups) != len(res.Manifest) {
			t.Fatalf("manifest JSON does not read back: %v", err)
		}
	})
}
