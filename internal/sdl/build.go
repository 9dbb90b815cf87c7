package sdl

import (
	"slices"
	"sort"
	"strings"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// Building groups and the manifest, step for step as Akash's SDL package does: the
// order of groups, services, ports, endpoints and volumes, and which values are null
// rather than empty, are all part of the manifest's version hash.

// groupBuilder accumulates one placement group.
type groupBuilder struct {
	spec     market.GroupSpec
	services []market.Service
	bound    map[string]int // compute profile -> index of its resource unit (SDL 2.1)
	tee      string
	origins  []unitOrigin // parallel to spec.Resources, for error messages
}

// unitOrigin remembers where a resource unit came from.
type unitOrigin struct {
	compute *computeProfile
	deps    []*deployment
	price   *yaml.Node // the unit's price in its placement's pricing
}

func (d *decoder) build(doc *document) (*Result, error) {
	if err := d.checkManifestSize(doc); err != nil {
		return nil, err
	}
	if err := d.validateDocument(doc); err != nil {
		return nil, err
	}
	seq := endpointSequenceNumbers(doc)
	builders := map[string]*groupBuilder{}
	for i := range doc.deployments {
		if err := d.addDeployment(doc, &doc.deployments[i], builders, seq); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(builders))
	for name := range builders {
		names = append(names, name)
	}
	sort.Strings(names)
	res := &Result{SDLVersion: doc.version.text}
	for _, name := range names {
		b := builders[name]
		sort.Slice(b.services, func(i, j int) bool { return b.services[i].Name < b.services[j].Name })
		res.Groups = append(res.Groups, b.spec)
		res.Manifest = append(res.Manifest, market.ManifestGroup{Name: name, Services: b.services})
	}
	if err := d.validateGroups(names, builders); err != nil {
		return nil, err
	}
	if err := d.validateManifest(doc, res.Manifest); err != nil {
		return nil, err
	}
	res.Version = res.Manifest.Version()
	if doc.reclamation != nil {
		res.Reclamation = &Reclamation{MinWindow: doc.parsedWindow}
	}
	return res, nil
}

// endpointSequenceNumbers numbers the leased-IP endpoint names: every "to" entry of the
// deployed services that is not a plain global port contributes its ip (possibly ""),
// the list is sorted, and each name gets the 1-based position of its last occurrence.
func endpointSequenceNumbers(doc *document) map[string]uint32 {
	var names []string
	for _, svcName := range doc.deployServices {
		svc := doc.services[svcName]
		if svc == nil {
			continue
		}
		for i := range svc.expose {
			for _, to := range svc.expose[i].to {
				if to.global && to.ip == "" {
					continue
				}
				names = append(names, to.ip)
			}
		}
	}
	sort.Strings(names)
	seq := make(map[string]uint32, len(names))
	for i, name := range names {
		seq[name] = uint32(i + 1)
	}
	return seq
}

func (d *decoder) addDeployment(doc *document, dep *deployment, builders map[string]*groupBuilder, seq map[string]uint32) error {
	compute := doc.computes[dep.profile]
	svc := doc.services[dep.service]
	infra := doc.placements[dep.placement]
	b := builders[dep.placement]
	if b == nil {
		b = &groupBuilder{bound: map[string]int{}}
		b.spec.Name = dep.placement
		b.spec.Requirements.Attributes = append(market.Attributes(nil), infra.attributes...)
		b.spec.Requirements.SignedBy = infra.signedBy
		builders[dep.placement] = b
	}
	if err := d.addTEE(b, svc, compute); err != nil {
		return err
	}
	exposes, err := d.manifestExposes(svc, seq)
	if err != nil {
		return err
	}
	endpoints := exposeEndpoints(exposes)
	resources := compute.resources.toResources()
	resources.Endpoints = endpoints
	if loc, bound := b.bound[dep.profile]; doc.version.v21() && bound {
		unit := &b.spec.Resources[loc]
		resources.ID = unit.Resources.ID
		unit.Count += dep.count
		unit.Resources.Endpoints = append(unit.Resources.Endpoints, endpoints...)
		sort.Sort(unit.Resources.Endpoints)
		b.origins[loc].deps = append(b.origins[loc].deps, dep)
	} else {
		// The unit gets its own copy of the endpoints: in 2.1 it grows as services join.
		unit := resources
		unit.Endpoints = append(make(market.Endpoints, 0, len(endpoints)), endpoints...)
		unit.ID = uint32(len(b.spec.Resources) + 1) //nolint:gosec // at most one per deployment entry
		resources.ID = unit.ID
		b.spec.Resources = append(b.spec.Resources, market.ResourceUnit{
			Resources: unit,
			Price:     infra.pricing[dep.profile].coin,
			Count:     dep.count,
		})
		b.origins = append(b.origins, unitOrigin{compute: compute, deps: []*deployment{dep}, price: infra.pricing[dep.profile].node})
		b.bound[dep.profile] = len(b.spec.Resources) - 1
	}
	ms := market.Service{
		Name:      dep.service,
		Image:     svc.image,
		Command:   svc.command,
		Args:      svc.args,
		Env:       svc.env,
		Resources: resources,
		Count:     dep.count,
		Expose:    exposes,
	}
	if p := svc.params; p != nil {
		ms.Params = &market.ServiceParams{Permissions: p.permissions}
		if len(p.storage) > 0 {
			ms.Params.Storage = make([]market.StorageParams, 0, len(p.storage))
			for _, sp := range p.storage {
				ms.Params.Storage = append(ms.Params.Storage, market.StorageParams{Name: sp.name, Mount: sp.mount, ReadOnly: sp.readOnly})
			}
			sort.Slice(ms.Params.Storage, func(i, j int) bool { return ms.Params.Storage[i].Name < ms.Params.Storage[j].Name })
		}
		if p.tee != "" {
			ms.Params.TEE = &market.TEEParams{Type: p.tee, Attestation: true}
		}
	}
	if c := svc.credentials; c != nil {
		if doc.version.v21() {
			ms.Credentials = &market.ServiceCredentials{
				Host:     strings.TrimSpace(c.host),
				Email:    strings.TrimSpace(c.email),
				Username: strings.TrimSpace(c.username),
				Password: strings.TrimSpace(c.password),
			}
		} else {
			// SDL 2.0 drops the email and keeps the values as written.
			ms.Credentials = &market.ServiceCredentials{Host: c.host, Username: c.username, Password: c.password}
		}
	}
	if dep.count == 0 {
		d.warnf(dep.countNode, "count is 0: service %q will not run in placement %q", dep.service, dep.placement)
	}
	b.services = append(b.services, ms)
	return nil
}

// addTEE checks a service's confidential-compute request and projects it onto the
// group as the placement attribute tee/type.
func (d *decoder) addTEE(b *groupBuilder, svc *service, compute *computeProfile) error {
	if svc.params == nil || svc.params.tee == "" {
		return nil
	}
	tee := svc.params.tee
	if tee != market.TEETypeCPU && tee != market.TEETypeCPUGPU {
		return d.errorf(svc.params.teeNode, "unsupported tee type %q (cpu or cpu-gpu)", tee)
	}
	gpu := compute.resources.gpu
	if tee == market.TEETypeCPUGPU && (gpu == nil || gpu.Units.Val == 0) {
		return d.errorf(svc.params.teeNode, "tee type %q needs GPUs, and compute profile %q has none", tee, compute.name)
	}
	switch b.tee {
	case "":
		b.tee = tee
		b.spec.Requirements.Attributes = append(b.spec.Requirements.Attributes, market.Attribute{Key: "tee/type", Value: tee})
		sort.Sort(byKey(b.spec.Requirements.Attributes))
	case tee:
	default:
		return d.errorf(svc.params.teeNode, "placement %q already asks for tee type %q; one group cannot mix tee types", b.spec.Name, b.tee)
	}
	return nil
}

// toResources is one replica's resources as the ledger records them (no ID or
// endpoints yet). A compute profile without GPUs asks for 0.
func (r *computeResources) toResources() market.Resources {
	var res market.Resources
	if r.cpu != nil {
		res.CPU = &market.CPU{Units: r.cpu.Units, Attributes: r.cpu.Attributes}
	}
	if r.gpu != nil {
		res.GPU = &market.GPU{Units: r.gpu.Units, Attributes: r.gpu.Attributes}
	} else {
		res.GPU = &market.GPU{}
	}
	if r.memory != nil {
		res.Memory = &market.Memory{Size: r.memory.Size, Attributes: r.memory.Attributes}
	}
	res.Storage = r.storageList()
	return res
}

// storageList is the profile's volumes as the ledger records them, built once and
// shared (read-only) by every unit and service that uses the profile.
func (r *computeResources) storageList() []market.Storage {
	if r.volumes == nil && len(r.storage) > 0 {
		r.volumes = make([]market.Storage, len(r.storage))
		for i := range r.storage {
			r.volumes[i] = r.storage[i].Storage
		}
	}
	return r.volumes
}

// exposeList sorts manifest ports as Akash does (sort.Sort, so ties stay where that
// algorithm leaves them): by destination service, port, protocol, global first. src,
// moved along, is the expose entry each port came from.
type exposeList struct {
	ports []market.ServiceExpose
	src   []*expose
}

func (e exposeList) Len() int { return len(e.ports) }
func (e exposeList) Swap(i, j int) {
	e.ports[i], e.ports[j] = e.ports[j], e.ports[i]
	e.src[i], e.src[j] = e.src[j], e.src[i]
}

func (e exposeList) Less(i, j int) bool { return market.CompareExpose(&e.ports[i], &e.ports[j]) < 0 }

// manifestExposes turns a service's expose entries into manifest ports: one per "to"
// destination, or one unexposed port when there is none. It checks each port, and that
// no hostname is accepted twice in the deployment.
func (d *decoder) manifestExposes(svc *service, seq map[string]uint32) ([]market.ServiceExpose, error) {
	n := 0
	for i := range svc.expose {
		n += max(1, len(svc.expose[i].to))
	}
	out := exposeList{ports: make([]market.ServiceExpose, 0, n), src: make([]*expose, 0, n)}
	for i := range svc.expose {
		e := &svc.expose[i]
		proto, err := d.protocol(e)
		if err != nil {
			return nil, err
		}
		http, err := d.manifestHTTPOptions(e.http)
		if err != nil {
			return nil, err
		}
		if len(e.to) == 0 {
			out.ports = append(out.ports, market.ServiceExpose{Port: e.port, ExternalPort: e.as, Proto: proto, Hosts: e.accept, HTTPOptions: http})
			out.src = append(out.src, e)
			continue
		}
		for _, to := range e.to {
			se := market.ServiceExpose{
				Service:      to.service,
				Port:         e.port,
				ExternalPort: e.as,
				Proto:        proto,
				Global:       to.global,
				Hosts:        e.accept,
				HTTPOptions:  http,
				IP:           to.ip,
			}
			if se.Global && se.IP != "" {
				se.EndpointSequenceNumber = seq[se.IP]
			}
			out.ports = append(out.ports, se)
			out.src = append(out.src, e)
		}
	}
	sort.Sort(out)
	for i := range out.ports {
		if err := d.validatePort(&out.ports[i], out.src[i]); err != nil {
			return nil, err
		}
	}
	return out.ports, nil
}

func (d *decoder) protocol(e *expose) (string, error) {
	switch strings.ToUpper(e.proto) {
	case "", market.ProtoTCP:
		return market.ProtoTCP, nil
	case market.ProtoUDP:
		return market.ProtoUDP, nil
	}
	return "", d.errorf(e.protoNod, "unsupported protocol %q (tcp or udp)", e.proto)
}

// exposeEndpoints lists the endpoints a service's ports need, in port order.
func exposeEndpoints(exposes []market.ServiceExpose) market.Endpoints {
	eps := make(market.Endpoints, 0)
	for i := range exposes {
		eps = append(eps, exposes[i].Endpoints()...)
	}
	return eps
}

// HTTP option defaults and limits (milliseconds and bytes), as on Akash.
const (
	defaultMaxBodySize = 1 << 20
	maxBodySize        = market.MaxBodySize
	defaultTimeout     = 60000
	maxTimeout         = market.MaxHTTPTimeout
	defaultNextTries   = 3
)

var nextCases = market.NextCases

func (d *decoder) manifestHTTPOptions(h httpOptions) (market.ServiceHTTPOptions, error) {
	out := market.ServiceHTTPOptions{
		MaxBodySize:     h.maxBodySize,
		ProxyBufferSize: h.proxyBufferSize,
		ReadTimeout:     h.readTimeout,
		SendTimeout:     h.sendTimeout,
		NextTries:       h.nextTries,
		NextTimeout:     h.next,
		NextCases:       h.nextCases,
	}
	switch {
	case out.MaxBodySize == 0:
		out.MaxBodySize = defaultMaxBodySize
	case out.MaxBodySize > maxBodySize:
		return out, d.errorf(h.node, "max_body_size %d is over the limit of %d bytes (100 MiB)", out.MaxBodySize, maxBodySize)
	}
	// proxy_buffer_size has no default here: 0 stays 0, which the manifest's JSON leaves
	// out, so a file without it keeps its version (Akash's chain-sdk, go/sdl/v2.go).
	if out.ProxyBufferSize > market.MaxProxyBufferSize {
		return out, d.errorf(h.proxyBufferNode, "proxy_buffer_size %d is over the limit of %d bytes (1 MiB)", out.ProxyBufferSize, market.MaxProxyBufferSize)
	}
	for _, t := range []struct {
		v    *uint32
		name string
	}{{&out.ReadTimeout, "read_timeout"}, {&out.SendTimeout, "send_timeout"}} {
		switch {
		case *t.v == 0:
			*t.v = defaultTimeout
		case *t.v > maxTimeout:
			return out, d.errorf(h.node, "%s %d is over the limit of %d ms", t.name, *t.v, maxTimeout)
		}
	}
	if out.NextTries == 0 {
		out.NextTries = defaultNextTries
	}
	if len(out.NextCases) == 0 {
		out.NextCases = []string{"error", "timeout"}
		return out, nil
	}
	for _, c := range out.NextCases {
		switch {
		case !slices.Contains(nextCases, c):
			return out, d.errorf(h.node, "unknown next_cases entry %q (one of %s)", c, strings.Join(nextCases, ", "))
		case c == "off" && len(out.NextCases) != 1:
			return out, d.errorf(h.node, "next_cases: \"off\" cannot be combined with other cases")
		}
	}
	return out, nil
}

// maxManifestBytes bounds the manifest a file may describe. Each deployment entry
// repeats its service and its compute profile in the manifest (and in the groups), so a
// small file can describe a huge one; real manifests are a few kilobytes.
const maxManifestBytes = 16 << 20

// checkManifestSize estimates, generously, the size of the manifest and groups the file
// would build, before building them.
func (d *decoder) checkManifestSize(doc *document) error {
	serviceSize := make(map[string]int, len(doc.services))
	for name, svc := range doc.services {
		n := 512 + len(svc.image)
		for _, list := range [][]string{svc.command, svc.args, svc.env} {
			for _, s := range list {
				n += 16 + 6*len(s) // JSON may escape a byte as \u00XX
			}
		}
		for i := range svc.expose {
			e := &svc.expose[i]
			hosts := 0
			for _, h := range e.accept {
				hosts += 16 + len(h)
			}
			n += max(1, len(e.to)) * (320 + hosts + 64)
		}
		if svc.params != nil {
			n += 128 * len(svc.params.storage)
		}
		serviceSize[name] = n
	}
	total := 0
	for i := range doc.deployments {
		dep := &doc.deployments[i]
		total += 256 + serviceSize[dep.service]
		if c := doc.computes[dep.profile]; c != nil && c.resources != nil {
			// The profile's volumes appear in the service and in its resource unit.
			total += 2 * 192 * len(c.resources.storage)
		}
		if total > maxManifestBytes {
			return d.errorf(doc.deployNode, "the deployment would make a manifest of more than %d MiB (each deployment entry repeats its service and compute profile); real ones are a few KiB",
				maxManifestBytes>>20)
		}
	}
	return nil
}
