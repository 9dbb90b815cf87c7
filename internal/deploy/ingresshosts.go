package deploy

import (
	"crypto/sha1" //nolint:gosec // G505: UUID version 5 is defined on SHA-1; it names, it does not protect
	"encoding/base32"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// namespaceDNS is RFC 4122's name space ID for DNS names (6ba7b810-9dad-11d1-80b4-00c04fd430c8).
var namespaceDNS = [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// IngressHostLabel is the DNS label of the hostname the provider gives a lease's
// service when it has an ingress domain: the UUID version 5 (DNS name space) of the
// lease ID followed by the service name, in lower-case base32hex without padding (26
// characters). It is the static host an Akash provider with
// --deployment-ingress-static-hosts gives the same lease and service, so it stays the
// same across manifest updates and restarts.
func IngressHostLabel(id market.LeaseID, service string) string {
	h := sha1.New() //nolint:gosec // see the import
	h.Write(namespaceDNS[:])
	h.Write([]byte(id.String() + service))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(u[:]))
}

// IngressHost is the hostname the provider gives a lease's service under domain.
func IngressHost(id market.LeaseID, service, domain string) string {
	return IngressHostLabel(id, service) + "." + domain
}

// WithIngressHosts returns a copy of g in which every HTTP ingress port (a global port
// 80) of each service also accepts the service's provider hostname under domain. With
// no domain, g is returned as it is.
func WithIngressHosts(id market.LeaseID, g market.ManifestGroup, domain string) market.ManifestGroup {
	return editIngressHosts(g, domain, func(svc string, hosts []string) []string {
		if h := IngressHost(id, svc, domain); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
		return hosts
	})
}

// WithoutIngressHosts undoes WithIngressHosts: the manifest as the tenant sent it.
func WithoutIngressHosts(id market.LeaseID, g market.ManifestGroup, domain string) market.ManifestGroup {
	return editIngressHosts(g, domain, func(svc string, hosts []string) []string {
		h := IngressHost(id, svc, domain)
		return slices.DeleteFunc(hosts, func(x string) bool { return x == h })
	})
}

// editIngressHosts copies g, changing the hosts of every ingress port with edit.
func editIngressHosts(g market.ManifestGroup, domain string, edit func(svc string, hosts []string) []string) market.ManifestGroup {
	if domain == "" {
		return g
	}
	g.Services = slices.Clone(g.Services)
	for i := range g.Services {
		svc := &g.Services[i]
		svc.Expose = slices.Clone(svc.Expose)
		for j := range svc.Expose {
			if e := &svc.Expose[j]; e.IsIngress() {
				e.Hosts = edit(svc.Name, slices.Clone(e.Hosts))
				if len(e.Hosts) == 0 {
					e.Hosts = nil
				}
			}
		}
	}
	return g
}
