package metallb

import (
	"net/netip"
	"testing"
)

// TestPoolSize: CIDRs and ranges, IPv4 and IPv6, with and without avoidBuggyIPs.
func TestPoolSize(t *testing.T) {
	cases := []struct {
		addrs      []string
		avoidBuggy bool
		want       int64
	}{
		{[]string{"192.0.2.0/28"}, false, 16},
		{[]string{"192.0.2.0/28"}, true, 15},
		{[]string{"192.0.2.0/24"}, true, 254},
		{[]string{"192.0.2.0/23"}, true, 508},
		{[]string{"192.0.2.10-192.0.2.20"}, false, 11},
		{[]string{"192.0.2.250-192.0.3.5"}, true, 10}, // skips .255 and .0
		{[]string{"192.0.2.7/32", "192.0.2.9/32"}, false, 2},
		{[]string{"2001:db8::/126"}, true, 4},
		{[]string{"2001:db8::/64"}, false, 1 << 40},
	}
	for _, c := range cases {
		p, err := ParsePool("p", c.addrs, c.avoidBuggy, true)
		if err != nil {
			t.Fatalf("%v: %v", c.addrs, err)
		}
		if got := p.Size(); got != c.want {
			t.Errorf("%v avoidBuggy=%v: size %d, want %d", c.addrs, c.avoidBuggy, got, c.want)
		}
	}
	p, _ := ParsePool("p", []string{"192.0.2.0/28", "2001:db8::1-2001:db8::3"}, true, true)
	for a, want := range map[string]bool{"192.0.2.1": true, "192.0.2.15": true, "192.0.2.0": false, "192.0.2.16": false,
		"2001:db8::2": true, "2001:db8::4": false, "::ffff:192.0.2.3": true} {
		if got := p.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	for _, bad := range []string{"192.0.2.0", "192.0.2.9-192.0.2.1", "192.0.2.1-2001:db8::1", "x/24", "192.0.2.1-"} {
		if _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) accepted", bad)
		}
	}
}

// FuzzParseRange: any input is refused or parsed into an ordered range.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"192.0.2.0/28", "192.0.2.10-192.0.2.20", "2001:db8::/120", "::1-::2", "1.2.3.4/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			return
		}
		if r.Last.Less(r.First) || r.First.Is4() != r.Last.Is4() {
			t.Fatalf("%q: range %v", s, r)
		}
		if r.Size(true).Sign() < 0 || r.Size(false).Sign() <= 0 {
			t.Fatalf("%q: size %v/%v", s, r.Size(true), r.Size(false))
		}
	})
}
