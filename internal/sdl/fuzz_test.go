package sdl

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime/metrics"
	"strings"
	"testing"

	"berth.dev/berth/api/market/v1"
)

// maxAllocBytes bounds what Parse may allocate for n bytes of input: the node tree and
// values grow with the input, and alias expansion is capped (the worst case known, an
// alias bomb of 708 bytes, allocates about 2.2 MB).
func maxAllocBytes(n int) uint64 { return 8<<20 + 200*uint64(n) }

// allocatedBytes is the process's cumulative heap allocation (coarse: small allocations
// show up when their span fills, which is enough to catch runaway growth).
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzParse feeds arbitrary input to the SDL reader. It must never panic, must fail
// only with an *Error, must allocate at most maxAllocBytes for the input (so hostile
// input cannot exhaust memory), and what it accepts must be consistent: the same result
// twice, canonical JSON, a version that is the manifest's hash as Akash computes it, and
// a manifest that reads back from its own JSON. (Run: go test ./internal/sdl -fuzz
// FuzzParse.)
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(aliasBomb()))
	// Every HTTP option, proxy_buffer_size (chain-sdk HEAD) among them.
	f.Add([]byte(strings.Replace(base, "        as: 80\n", "        as: 80\n        http_options:\n          max_body_size: 2097152\n"+
		"          proxy_buffer_size: 32768\n          read_timeout: 30000\n          send_timeout: 30000\n          next_tries: 5\n"+
		"          next_timeout: 1000\n          next_cases: [error, timeout, \"502\"]\n", 1)))
	cases := loadCorpus(f)
	for i := range cases {
		f.Add(cases[i].input)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocatedBytes()
		res, ws, err := Parse(data, Options{})
		if used := allocatedBytes() - before; used > maxAllocBytes(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d bytes, over the bound of %d", len(data), used, maxAllocBytes(len(data)))
		}
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
		for _, g := range res.Manifest {
			for _, svc := range g.Services {
				for _, e := range svc.Expose {
					if e.HTTPOptions.ProxyBufferSize > market.MaxProxyBufferSize {
						t.Fatalf("service %s: proxy buffer size %d accepted, over the limit", svc.Name, e.HTTPOptions.ProxyBufferSize)
					}
				}
			}
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
