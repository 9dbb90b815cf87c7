package market

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameRules checks the hand-written name checks against the regular expressions
// Akash states them with.
func TestNameRules(t *testing.T) {
	rules := []struct {
		check func(string) bool
		want  func(string) bool
	}{
		{ValidEndpointName, regexp.MustCompile(`^[[:lower:]]+[[:lower:]-_\d]+$`).MatchString},
		{ValidServiceName, regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`).MatchString},
		{ValidEnvVarName, func(s string) bool {
			return regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`).MatchString(s) && s != "." && !strings.HasPrefix(s, "..")
		}},
		{ValidHostname, func(s string) bool {
			return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`).MatchString(s) && len(s) <= 253
		}},
	}
	alphabet := "aZ0-_.é /"
	var all []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		all = append(all, prefix)
		if n > 0 {
			for _, r := range alphabet {
				gen(prefix+string(r), n-1)
			}
		}
	}
	gen("", 4)
	for i, r := range rules {
		for _, s := range all {
			if got, want := r.check(s), r.want(s); got != want {
				t.Errorf("rule %d on %q: %v, regexp says %v", i, s, got, want)
			}
		}
	}
}

// TestValidHostPattern: wildcards are one leading "*." over a name of two labels or
// more; HostCovers reads them as Gateway API does (any depth).
func TestValidHostPattern(t *testing.T) {
	for s, want := range map[string]bool{
		"example.com": true, "*.example.com": true, "*.a.example.com": true,
		"*.com": false, "*": false, "a.*.example.com": false, "**.example.com": false, "*example.com": false, "*.Example.com": false, "": false,
	} {
		if got := ValidHostPattern(s); got != want {
			t.Errorf("ValidHostPattern(%q) = %v, want %v", s, got, want)
		}
	}
	for _, c := range []struct {
		p, h string
		want bool
	}{
		{"a.example.com", "a.example.com", true}, {"*.example.com", "a.example.com", true}, {"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false}, {"*.example.com", "aexample.com", false}, {"a.example.com", "b.example.com", false},
	} {
		if got := HostCovers(c.p, c.h); got != c.want {
			t.Errorf("HostCovers(%q, %q) = %v, want %v", c.p, c.h, got, c.want)
		}
	}
}
