package localenv

import "testing"

// TestInTestNet pins the guard of MetalLB pools made here: every address they hand
// out lies in one documentation range (TEST-NET-1 to -3).
func TestInTestNet(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"192.0.2.0/24", true},
		{"192.0.2.0/30", true},
		{"192.0.2.16/28", true},
		{"192.0.2.7/32", true},
		{"192.0.2.1-192.0.2.5", true},
		{"192.0.2.1 - 192.0.2.5", true},
		{"198.51.100.0/24", true},
		{"203.0.113.8/29", true},
		{"198.51.100.1-198.51.100.9", true},
		{"192.0.2.1-198.51.100.5", false},
		{"198.51.100.0/23", false},
		{"192.0.2.0/23", false},
		{"192.0.3.0/30", false},
		{"10.0.0.0/30", false},
		{"0.0.0.0/0", false},
		{"192.0.2.250-192.0.3.4", false},
		{"10.0.0.1-192.0.2.5", false},
		{"2001:db8::/126", false},
		{"::ffff:192.0.2.0/120", false},
		{"192.0.2.0", false},
		{"not an address", false},
		{"", false},
	} {
		if err := inTestNet(tc.entry); (err == nil) != tc.ok {
			t.Errorf("inTestNet(%q) = %v, want ok=%v", tc.entry, err, tc.ok)
		}
	}
}
