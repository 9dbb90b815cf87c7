package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// CheckVersion reports a manifest whose version hash is not the deployment's.
func CheckVersion(m market.Manifest, deployment []byte) error {
	if v := m.Version(); !bytes.Equal(v, deployment) {
		return errorf("", "manifest version %x is not the deployment's version %x on the ledger (update the deployment first, or send the manifest it was created with)", v, deployment)
	}
	return nil
}

// CheckGroup reports how a manifest group does not fit its group on the ledger: each
// service must have the exact resources of a resource unit (cpu, memory, storage,
// gpu, endpoints) and take no more replicas than the unit has left; its ports may not
// use more endpoints of a kind than its resources list; and every unit's replicas
// must be used.
func CheckGroup(gp string, g *market.ManifestGroup, spec *market.GroupSpec) error {
	if g.Name != spec.Name {
		return errorf(gp+".name", "group %q is not the ledger's group %q", g.Name, spec.Name)
	}
	left := make([]uint32, len(spec.Resources))
	endpoints := make([]map[market.Endpoint]int, len(spec.Resources))
	for i := range spec.Resources {
		left[i] = spec.Resources[i].Count
		endpoints[i] = map[market.Endpoint]int{}
	}
	for si := range g.Services {
		s := &g.Services[si]
		sp := fmt.Sprintf("%s.services[%d]", gp, si)
		ui := -1
		for i := range spec.Resources {
			if spec.Resources[i].Resources.ID == s.Resources.ID {
				ui = i
				break
			}
		}
		if ui < 0 {
			return errorf(sp+".resources.id", "service %q uses resource unit %d, which group %q does not have", s.Name, s.Resources.ID, g.Name)
		}
		if err := sameResources(sp+".resources", s, &spec.Resources[ui].Resources); err != nil {
			return err
		}
		if s.Count > left[ui] {
			return errorf(sp+".count", "service %q runs %d replicas; resource unit %d of group %q has %d left", s.Name, s.Count, s.Resources.ID, g.Name, left[ui])
		}
		left[ui] -= s.Count
		for _, e := range s.Resources.Endpoints {
			endpoints[ui][e]++
		}
		if err := endpointsUsed(sp, s); err != nil {
			return err
		}
	}
	for i, n := range left {
		u := &spec.Resources[i]
		if n > 0 {
			return errorf(gp+".services", "resource unit %d of group %q has %d replicas no service runs", u.Resources.ID, g.Name, n)
		}
		// Services with the same resources share a unit, which lists all their
		// endpoints.
		want := map[market.Endpoint]int{}
		for _, e := range u.Resources.Endpoints {
			want[e]++
		}
		if !maps.Equal(want, endpoints[i]) {
			return errorf(gp+".services", "the services on resource unit %d of group %q ask for endpoints %s; the unit on the ledger has %s",
				u.Resources.ID, g.Name, describeEndpoints(endpoints[i]), describeEndpoints(want))
		}
	}
	return nil
}

// describeEndpoints lists endpoint counts in a stable order: "2 random port, 1 leased IP #1".
func describeEndpoints(m map[market.Endpoint]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b market.Endpoint) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		return int(a.SequenceNumber) - int(b.SequenceNumber)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], kindName(k.Kind))
		if k.Kind == market.EndpointLeasedIP {
			parts[i] += fmt.Sprintf(" #%d", k.SequenceNumber)
		}
	}
	return strings.Join(parts, ", ")
}

// sameResources compares each kind of resource by its canonical JSON.
func sameResources(rp string, s *market.Service, unit *market.Resources) error {
	r := &s.Resources
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"cpu", r.CPU, unit.CPU},
		{"memory", r.Memory, unit.Memory},
		{"storage", r.Storage, unit.Storage},
		{"gpu", r.GPU, unit.GPU},
	} {
		got, err1 := json.Marshal(c.got)
		want, err2 := json.Marshal(c.want)
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			return errorf(rp+"."+c.field, "service %q asks for %s %s; its resource unit on the ledger has %s", s.Name, c.field, got, want)
		}
	}
	return nil
}

// endpointsUsed checks that the service's ports need no more endpoints of each kind
// than its resources list (and leased IPs by their sequence numbers).
func endpointsUsed(sp string, s *market.Service) error {
	have := map[market.Endpoint]int{}
	for _, e := range s.Resources.Endpoints {
		if e.Kind != market.EndpointLeasedIP {
			e.SequenceNumber = 0
		}
		have[e]++
	}
	for i := range s.Expose {
		for _, e := range s.Expose[i].Endpoints() {
			if e.Kind != market.EndpointLeasedIP {
				e.SequenceNumber = 0
			}
			if have[e] == 0 {
				return errorf(fmt.Sprintf("%s.expose[%d]", sp, i), "service %q: port %d needs a %s endpoint its resources do not list", s.Name, s.Expose[i].Port, kindName(e.Kind))
			}
			have[e]--
		}
	}
	return nil
}

func kindName(k market.EndpointKind) string {
	switch k {
	case market.EndpointSharedHTTP:
		return "shared HTTP"
	case market.EndpointRandomPort:
		return "random port"
	case market.EndpointLeasedIP:
		return "leased IP"
	}
	return fmt.Sprintf("kind-%d", k)
}

// CheckDeployment checks a whole manifest against the deployment's groups on the
// ledger: one manifest group per ledger group, by name, each fitting (CheckGroup).
func CheckDeployment(m market.Manifest, groups []market.GroupSpec) error {
	if len(m) != len(groups) {
		return errorf("", "manifest has %d groups; the deployment has %d", len(m), len(groups))
	}
	for i := range m {
		gp := fmt.Sprintf("[%d]", i)
		spec := findGroup(groups, m[i].Name)
		if spec == nil {
			return errorf(gp+".name", "the deployment has no group %q", m[i].Name)
		}
		if err := CheckGroup(gp, &m[i], spec); err != nil {
			return err
		}
	}
	return nil
}

func findGroup(groups []market.GroupSpec, name string) *market.GroupSpec {
	for i := range groups {
		if groups[i].Name == name {
			return &groups[i]
		}
	}
	return nil
}
