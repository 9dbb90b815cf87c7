package sdl

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// The checks Akash makes on an SDL: its SDL package's validation, the ledger's checks
// on deployment groups, and the manifest's own validation. A file passes here exactly
// when it passes there.

// Per-replica and per-group limits the network enforces.
const (
	minUnitCPU     = 10         // millicores
	maxUnitCPU     = 384 * 1000 // millicores
	maxUnitGPU     = 24
	minUnitMemory  = 1 << 20 // 1 Mi
	maxUnitMemory  = 2 << 40 // 2 Ti
	minUnitStorage = 5 << 20
	maxUnitStorage = 32 << 40
	maxUnitCount   = 50 // only scales the group totals; a unit's count is not capped
	maxUnitPrice   = 10_000_000
)

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// names lists a map's keys for an error message.
func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(m), ", ")
}

// validateDocument checks references and per-service rules before anything is built.
func (d *decoder) validateDocument(doc *document) error {
	if doc.reclamation != nil {
		w, err := time.ParseDuration(doc.minWindow)
		switch {
		case err != nil:
			return d.errorf(doc.reclamation, "min_window %q is not a duration (e.g. 24h, 90m)", doc.minWindow)
		case w <= 0:
			return d.errorf(doc.reclamation, "min_window must be greater than 0")
		}
		doc.parsedWindow = w
	}
	for _, name := range doc.endpointNames {
		e := doc.endpoints[name]
		switch {
		case !market.ValidEndpointName(name):
			return d.errorf(e.keyNode, "endpoint name %q must be lowercase letters, then letters, digits, '-' or '_' (at least 2 characters)", name)
		case e.kind == "":
			return d.errorf(e.kindNode, "endpoint %q has no kind (kind: ip)", name)
		case e.kind != "ip":
			return d.errorf(e.kindNode, "endpoint %q has unknown kind %q; the only kind is ip", name, e.kind)
		}
	}
	if len(doc.deployments) == 0 {
		at := doc.deployNode
		if at == nil {
			at = d.root
		}
		return d.errorf(at, "nothing is deployed: deployment must place at least one service (deployment: {web: {dcloud: {profile: web, count: 1}}})")
	}
	deployed := map[string]bool{}
	for _, dep := range doc.deployments {
		deployed[dep.service] = true
	}
	for _, name := range sortedKeys(doc.services) {
		if !deployed[name] {
			d.warnf(doc.services[name].keyNode, "service %q is not deployed: no entry under deployment places it", name)
		}
	}
	used := map[string]bool{}
	ports := map[string]string{}
	for i := range doc.deployments {
		if err := d.validateDeployment(doc, &doc.deployments[i], used, ports); err != nil {
			return err
		}
	}
	for _, name := range doc.endpointNames {
		if !used[name] {
			return d.errorf(doc.endpoints[name].keyNode, "endpoint %q is declared but no service uses it", name)
		}
	}
	return nil
}

func (d *decoder) validateDeployment(doc *document, dep *deployment, usedEndpoints map[string]bool, ports map[string]string) error {
	compute, ok := doc.computes[dep.profile]
	if !ok {
		return d.errorf(dep.profileNode, "no compute profile named %q (profiles.compute has: %s)", dep.profile, names(doc.computes))
	}
	if compute.resources == nil {
		return d.errorf(compute.keyNode, "compute profile %q has no resources", compute.name)
	}
	infra, ok := doc.placements[dep.placement]
	switch {
	case !ok:
		return d.errorf(dep.node, "no placement profile named %q (profiles.placement has: %s)", dep.placement, names(doc.placements))
	case dep.placement == "":
		return d.errorf(dep.node, "a placement needs a name")
	}
	switch p, ok := infra.pricing[dep.profile]; {
	case !ok:
		return d.errorf(infra.pricingN, "placement %q has no price for compute profile %q", dep.placement, dep.profile)
	case !p.set:
		return d.errorf(p.node, "the price for compute profile %q is empty (amount and denom)", dep.profile)
	}
	svc, ok := doc.services[dep.service]
	if !ok {
		return d.errorf(dep.serviceNode, "no service named %q (services has: %s)", dep.service, names(doc.services))
	}
	if c := svc.credentials; c != nil {
		for _, f := range []struct {
			v    string
			n    *yaml.Node
			name string
		}{{c.host, c.hostN, "host"}, {c.username, c.usernameN, "username"}, {c.password, c.passwN, "password"}} {
			if strings.TrimSpace(f.v) == "" {
				return d.errorf(f.n, "image registry credentials need a %s", f.name)
			}
		}
	}
	for i := range svc.expose {
		e := &svc.expose[i]
		for _, to := range e.to {
			if to.ip == "" {
				continue
			}
			if !to.global {
				return d.errorf(to.ipNode, "a leased IP needs global: true on the same entry")
			}
			if _, ok := doc.endpoints[to.ip]; !ok {
				return d.errorf(to.ipNode, "no endpoint named %q (endpoints has: %s)", to.ip, names(doc.endpoints))
			}
			usedEndpoints[to.ip] = true
			key := fmt.Sprintf("%s-%d-%s", to.ip, e.as, e.proto)
			if other, taken := ports[key]; taken {
				return d.errorf(to.ipNode, "IP endpoint %q port %d/%s is already used by service %q", to.ip, e.as, e.proto, other)
			}
			ports[key] = dep.service
		}
	}
	return d.validateMounts(doc, svc, compute)
}

// validateMounts checks a service's volume mounts against its compute profile's volumes.
func (d *decoder) validateMounts(doc *document, svc *service, compute *computeProfile) error {
	mounts := map[string]string{}
	var params []storageParam
	if svc.params != nil {
		params = svc.params.storage
	}
	for _, sp := range params {
		vol := compute.resources.volume(sp.name)
		switch {
		case vol == nil:
			return d.errorf(sp.keyNode, "service %q mounts volume %q, which compute profile %q does not have (it has: %s)", svc.name, sp.name, compute.name, volumeNames(compute.resources.storage))
		case !path.IsAbs(sp.mount):
			return d.errorf(sp.keyNode, "mount %q must be an absolute path", sp.mount)
		}
		if other, taken := mounts[sp.mount]; taken {
			return d.errorf(sp.keyNode, "mount point %q is already used by volume %q", sp.mount, other)
		}
		mounts[sp.mount] = sp.name
		class, _ := vol.Attributes.Find(market.StorageAttributeClass)
		if doc.version.v21() && class == market.StorageClassRAM && sp.readOnly {
			return d.errorf(sp.keyNode, "volume %q has storage class ram, which cannot be mounted readOnly", sp.name)
		}
	}
	// SDL 2.0 requires a persistent volume to be mounted, but (as Akash checks it) any
	// mount of the service satisfies that; SDL 2.1 does not check it here.
	if !doc.version.v21() && len(params) == 0 {
		for _, v := range compute.resources.storage {
			if p, _ := v.Attributes.Find(market.StorageAttributePersistent); parseBool(p) {
				return d.errorf(v.node, "persistent volume %q must be mounted: add services.%s.params.storage.%s.mount", v.Name, svc.name, v.Name)
			}
		}
	}
	return nil
}

func volumeNames(vols []volume) string {
	out := make([]string, len(vols))
	for i := range vols {
		out[i] = vols[i].Name
	}
	return strings.Join(out, ", ")
}

// validateGroups applies the ledger's checks on deployment groups: resource limits per
// replica and per group, and prices.
func (d *decoder) validateGroups(order []string, builders map[string]*groupBuilder) error {
	denom := ""
	for _, name := range order {
		b := builders[name]
		var cpu, gpu, mem uint64
		for i, u := range b.spec.Resources {
			o := b.origins[i]
			if err := d.validateUnit(o, u.Resources); err != nil {
				return err
			}
			if err := d.validatePrice(o, u.Price); err != nil {
				return err
			}
			switch {
			case denom == "":
				denom = u.Price.Denom
			case u.Price.Denom != denom:
				return d.errorf(o.price, "all prices must use one denomination: %q here, %q elsewhere", u.Price.Denom, denom)
			}
			cpu = addSat(cpu, mulSat(uint64(u.Resources.CPU.Units.Val), uint64(u.Count)))
			gpu = addSat(gpu, mulSat(uint64(u.Resources.GPU.Units.Val), uint64(u.Count)))
			mem = addSat(mem, mulSat(uint64(u.Resources.Memory.Size.Val), uint64(u.Count)))
		}
		first := b.origins[0].deps[0]
		switch {
		case cpu == 0:
			return d.errorf(first.countNode, "placement %q runs no replicas (every count is 0)", name)
		case cpu > maxUnitCPU*maxUnitCount:
			return d.errorf(first.countNode, "placement %q asks for %d millicores in total, over the limit of %d", name, cpu, maxUnitCPU*maxUnitCount)
		case gpu > maxUnitGPU*maxUnitCount:
			return d.errorf(first.countNode, "placement %q asks for %d GPUs in total, over the limit of %d", name, gpu, maxUnitGPU*maxUnitCount)
		case mem == 0 || mem > maxUnitMemory*maxUnitCount:
			return d.errorf(first.countNode, "placement %q asks for %d bytes of memory in total, outside 1–%d", name, mem, uint64(maxUnitMemory*maxUnitCount))
		}
	}
	return nil
}

func mulSat(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// validateUnit checks one replica's resources against the network's limits.
func (d *decoder) validateUnit(o unitOrigin, r market.Resources) error {
	res := o.compute.resources
	at := func(nodes ...*yaml.Node) *yaml.Node {
		for _, n := range nodes {
			if n != nil {
				return n
			}
		}
		return res.node
	}
	switch {
	case r.CPU == nil:
		return d.errorf(res.node, "compute profile %q needs cpu (e.g. cpu: {units: 0.5})", o.compute.name)
	case res.cpuUnitsNode == nil:
		return d.errorf(at(res.cpuNode), "cpu needs units (e.g. units: 0.5, or units: 500m)")
	case r.CPU.Units.Val < minUnitCPU || r.CPU.Units.Val > maxUnitCPU:
		return d.errorf(at(res.cpuUnitsNode, res.cpuNode), "cpu units must be 10m–384 CPUs (%d–%d millicores), found %d millicores", minUnitCPU, maxUnitCPU, r.CPU.Units.Val)
	case r.GPU.Units.Val > maxUnitGPU:
		return d.errorf(at(res.gpuUnitsNode, res.gpuNode), "gpu units must be at most %d, found %d", maxUnitGPU, r.GPU.Units.Val)
	case r.GPU.Units.Val == 0 && len(r.GPU.Attributes) > 0:
		return d.errorf(at(res.gpuNode), "GPU attributes are set but units is 0")
	case r.Memory == nil:
		return d.errorf(res.node, "compute profile %q needs memory (e.g. memory: {size: 512Mi})", o.compute.name)
	case res.memorySizeNode == nil:
		return d.errorf(at(res.memoryNode), "memory needs a size (e.g. size: 512Mi)")
	case r.Memory.Size.Val < minUnitMemory || r.Memory.Size.Val > maxUnitMemory:
		return d.errorf(at(res.memorySizeNode, res.memoryNode), "memory size must be 1Mi–2Ti, found %d bytes", r.Memory.Size.Val)
	case r.Storage == nil:
		return d.errorf(at(res.storageNode), "compute profile %q needs storage: at least the container's own disk (storage: {size: 1Gi})", o.compute.name)
	}
	if err := validateAttributes(r.CPU.Attributes); err != nil {
		return d.errorf(at(res.cpuNode), "invalid cpu attributes: %v", err)
	}
	for _, v := range res.storage {
		if v.Size.Val < minUnitStorage || v.Size.Val > maxUnitStorage {
			return d.errorf(v.node, "storage volume %q size must be 5Mi–32Ti, found %d bytes", v.Name, v.Size.Val)
		}
	}
	return nil
}

func (d *decoder) validatePrice(o unitOrigin, p market.DecCoin) error {
	node := o.price
	switch {
	case !market.ValidDenom(p.Denom):
		return d.errorf(node, "denom %q is not a valid denomination (a letter, then 2–127 letters, digits or /:._-)", p.Denom)
	case p.Amount.Cmp(market.NewDec(maxUnitPrice)) > 0:
		return d.errorf(node, "amount %s is over the per-replica limit of %d", p.Amount, maxUnitPrice)
	}
	return nil
}

// validateManifest applies the manifest's own checks that are not made while building
// it: names, images, environment variable names, and at least one global port.
func (d *decoder) validateManifest(doc *document, m market.Manifest) error {
	global := false
	for _, g := range m {
		for i := range g.Services {
			s := &g.Services[i]
			svc := doc.services[s.Name]
			switch {
			case !market.ValidServiceName(s.Name):
				return d.errorf(svc.keyNode, "service name %q must be lowercase letters, digits and '-', starting with a letter and not ending with '-'", s.Name)
			case s.Image == "":
				return d.errorf(svc.imageNode, "service %q has no image", s.Name)
			}
			for _, env := range s.Env {
				name, _, _ := strings.Cut(env, "=")
				if !market.ValidEnvVarName(name) {
					return d.errorf(svc.envNode, "environment variable name %q is invalid: letters, digits, '_', '-' and '.', not starting with a digit", name)
				}
			}
			for j := range s.Expose {
				global = global || s.Expose[j].Global
			}
		}
	}
	if !global {
		return d.errorf(doc.servicesNode, "no service is reachable from outside: expose at least one port with to: [{global: true}]")
	}
	return nil
}

// validatePort checks one manifest port, made from the expose entry src, and records
// its hostnames: a hostname may be accepted once per deployment.
func (d *decoder) validatePort(e *market.ServiceExpose, src *expose) error {
	if e.Port == 0 || e.Port > math.MaxUint16 {
		return d.errorf(src.portNode, "port %d is outside 1–65535", e.Port)
	}
	for _, h := range e.Hosts {
		switch {
		case !market.ValidHostPattern(h):
			return d.errorf(src.acceptN, "hostname %q is not a valid lowercase DNS name (or a wildcard *.name.tld)", h)
		case d.hosts[h]:
			return d.errorf(src.acceptN, "hostname %q appears more than once; a hostname may be accepted once per deployment (an expose entry with several to destinations counts once per destination)", h)
		}
		if d.hosts == nil {
			d.hosts = make(map[string]bool)
		}
		d.hosts[h] = true
	}
	return nil
}
