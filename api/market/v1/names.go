package market

import "strings"

// Name rules for manifests and SDL files, as Akash's regular expressions state them.
// The SDL parser and the provider's manifest check use the same ones, so a manifest a
// tenant built from a valid SDL always passes.

func lower(c byte) bool { return c >= 'a' && c <= 'z' }
func digit(c byte) bool { return c >= '0' && c <= '9' }

// ValidEndpointName reports ^[a-z]+[a-z0-9_-]+$ (so at least two characters).
func ValidEndpointName(s string) bool {
	if len(s) < 2 || !lower(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lower(c) && !digit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidLabel reports ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ (an RFC 1123 label, any length).
func ValidLabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !lower(c) && !digit(c) && c != '-' {
			return false
		}
	}
	return true
}

// ValidServiceName reports ^[a-z]([-a-z0-9]*[a-z0-9])?$.
func ValidServiceName(s string) bool { return s != "" && lower(s[0]) && ValidLabel(s) }

// ValidEnvVarName reports ^[-._a-zA-Z][-._a-zA-Z0-9]*$, and not ".", "..", or "..…"
// (Kubernetes).
func ValidEnvVarName(s string) bool {
	if s == "" || digit(s[0]) || s == "." || strings.HasPrefix(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !lower(c|0x20) && !digit(c) && c != '-' && c != '.' && c != '_' {
			return false
		}
	}
	return true
}

// ValidHostPattern reports a hostname a tenant's HTTP port may accept: a valid
// hostname, or a wildcard "*." followed by one with at least two labels
// (*.example.com, not *.com).
func ValidHostPattern(s string) bool {
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		return strings.Contains(rest, ".") && ValidHostname(rest)
	}
	return ValidHostname(s)
}

// HostCovers reports whether hostname pattern p (a name, or a wildcard "*.suffix")
// can receive requests for name h: they are equal, or p is a wildcard whose suffix h
// is under. Wildcards are taken as Gateway API takes them (any number of labels), the
// wider of the two readings an ingress may use.
func HostCovers(p, h string) bool {
	if p == h {
		return true
	}
	suffix, ok := strings.CutPrefix(p, "*.")
	return ok && strings.HasSuffix(h, "."+suffix)
}

// ValidHostname reports an RFC 1123 subdomain of lowercase labels, at most 253
// characters.
func ValidHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !ValidLabel(label) {
			return false
		}
	}
	return true
}

// CompareExpose orders a service's ports as Akash sorts them: by destination service,
// port, protocol, global first. Akash sorts with sort.Sort, so ports equal here keep
// the order that algorithm leaves them in.
func CompareExpose(a, b *ServiceExpose) int {
	switch {
	case a.Service != b.Service:
		return strings.Compare(a.Service, b.Service)
	case a.Port != b.Port:
		if a.Port < b.Port {
			return -1
		}
		return 1
	case a.Proto != b.Proto:
		return strings.Compare(a.Proto, b.Proto)
	case a.Global != b.Global:
		if a.Global {
			return -1
		}
		return 1
	}
	return 0
}
