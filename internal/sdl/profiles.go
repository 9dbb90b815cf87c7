package sdl

import (
	"fmt"
	"sort"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// The profiles, deployment, endpoints and reclamation sections.

type computeProfile struct {
	name      string
	keyNode   *yaml.Node
	resources *computeResources
}

type computeResources struct {
	node           *yaml.Node
	cpu            *market.CPU
	cpuNode        *yaml.Node
	cpuUnitsNode   *yaml.Node
	gpu            *market.GPU
	gpuNode        *yaml.Node
	gpuUnitsNode   *yaml.Node
	memory         *market.Memory
	memoryNode     *yaml.Node
	memorySizeNode *yaml.Node
	storage        []volume
	storageNode    *yaml.Node
	volumes        []market.Storage   // storage as the ledger records it (storageList)
	byName         map[string]*volume // storage by name (volume)
}

// volume returns the profile's volume named name, or nil.
func (r *computeResources) volume(name string) *volume {
	if r.byName == nil {
		r.byName = make(map[string]*volume, len(r.storage))
		for i := range r.storage {
			r.byName[r.storage[i].Name] = &r.storage[i]
		}
	}
	return r.byName[name]
}

type volume struct {
	node *yaml.Node
	market.Storage
}

type placementProfile struct {
	name       string
	keyNode    *yaml.Node
	attributes market.Attributes
	signedBy   market.SignedBy
	pricing    map[string]price
	pricingN   *yaml.Node
}

type price struct {
	node *yaml.Node
	coin market.DecCoin
	set  bool // false for a null entry
}

// deployment is one service's placement: which compute profile, how many replicas.
type deployment struct {
	service, placement string
	serviceNode        *yaml.Node // the service's key under deployment
	node               *yaml.Node // the placement's key under the service
	profile            string
	profileNode        *yaml.Node
	count              uint32
	countNode          *yaml.Node
}

type endpointDecl struct {
	name     string
	keyNode  *yaml.Node
	kind     string
	kindNode *yaml.Node
}

var (
	profilesKeys    = fieldSet{known: []string{"compute", "placement"}}
	computeKeys     = fieldSet{known: []string{"resources"}}
	resourcesKeys   = fieldSet{known: []string{"cpu", "gpu", "memory", "storage"}}
	cpuKeys         = fieldSet{known: []string{"units", "attributes"}}
	cpuAttrKeys     = fieldSet{known: []string{"arch"}, unknownIsError: true, raw: true}
	gpuKeys         = fieldSet{known: []string{"units", "attributes"}, unknownIsError: true, raw: true}
	gpuAttrKeys     = fieldSet{known: []string{"vendor"}, unknownIsError: true, raw: true}
	vendorKeys      = fieldSet{known: []string{"nvidia"}}
	nvidiaKeys      = fieldSet{known: []string{"model", "ram", "interface"}}
	memoryKeys      = fieldSet{known: []string{"size"}}
	volumeKeys      = fieldSet{known: []string{"name", "size", "attributes"}}
	placementKeys   = fieldSet{known: []string{"attributes", "signedBy", "pricing"}}
	signedByKeys    = fieldSet{known: []string{"allOf", "anyOf"}}
	coinKeys        = fieldSet{known: []string{"amount", "denom"}}
	deploymentKeys  = fieldSet{known: []string{"profile", "count"}}
	endpointKeys    = fieldSet{known: []string{"kind"}}
	reclamationKeys = fieldSet{known: []string{"min_window"}}
)

func (d *decoder) profiles(n *yaml.Node, doc *document) error {
	fs, err := d.fields(n, profilesKeys)
	if err != nil {
		return err
	}
	for _, f := range fs {
		switch f.key {
		case "compute":
			err = d.computeProfiles(f.val, doc)
		case "placement":
			err = d.placementProfiles(f.val, doc)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) computeProfiles(n *yaml.Node, doc *document) error {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return err
	}
	doc.computes = make(map[string]*computeProfile, len(fs))
	for _, f := range fs {
		c := &computeProfile{name: f.key, keyNode: f.keyNod}
		gs, err := d.fields(f.val, computeKeys)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if c.resources, err = d.computeResources(g.val); err != nil {
				return err
			}
		}
		doc.computes[f.key] = c
	}
	return nil
}

func (d *decoder) computeResources(n *yaml.Node) (*computeResources, error) {
	fs, present, err := d.optionalFields(n, resourcesKeys)
	if !present {
		return nil, err
	}
	r := &computeResources{node: n}
	for _, f := range fs {
		switch f.key {
		case "cpu":
			r.cpuNode = f.val
			r.cpu, r.cpuUnitsNode, err = d.cpu(f.val)
		case "gpu":
			r.gpuNode = f.val
			r.gpu, r.gpuUnitsNode, err = d.gpu(f.val)
		case "memory":
			r.memoryNode = f.val
			r.memory, r.memorySizeNode, err = d.memory(f.val)
		case "storage":
			r.storageNode = f.val
			r.storage, err = d.storage(f.val)
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// unitsBlock reads the {units, attributes} shape that cpu and gpu share. It reports
// whether the block is there (not null), the units' node, and their values.
func (d *decoder) unitsBlock(n *yaml.Node, set fieldSet, readUnits func(*yaml.Node) (uint64, error),
	readAttrs func(*yaml.Node) (market.Attributes, error),
) (present bool, unitsNode *yaml.Node, units market.ResourceValue, attrs market.Attributes, err error) {
	fs, present, err := d.optionalFields(n, set)
	if !present {
		return false, nil, units, nil, err
	}
	for _, f := range fs {
		switch f.key {
		case "units":
			var u uint64
			u, err = readUnits(f.val)
			units.Val, unitsNode = market.Uint(u), f.val
		case "attributes":
			attrs, err = readAttrs(f.val)
		}
		if err != nil {
			return false, nil, units, nil, err
		}
	}
	return true, unitsNode, units, attrs, nil
}

func (d *decoder) cpu(n *yaml.Node) (*market.CPU, *yaml.Node, error) {
	present, unitsNode, units, attrs, err := d.unitsBlock(n, cpuKeys, d.millicpu,
		func(a *yaml.Node) (market.Attributes, error) { return d.attributes(a, cpuAttrKeys) })
	if err != nil || !present {
		return nil, nil, err
	}
	return &market.CPU{Units: units, Attributes: attrs}, unitsNode, nil
}

func (d *decoder) memory(n *yaml.Node) (*market.Memory, *yaml.Node, error) {
	fs, present, err := d.optionalFields(n, memoryKeys)
	if !present {
		return nil, nil, err
	}
	m := &market.Memory{}
	var sizeNode *yaml.Node
	for _, f := range fs {
		size, err := d.bytes(f.val, false)
		if err != nil {
			return nil, nil, err
		}
		m.Size.Val, sizeNode = market.Uint(size), f.val
	}
	return m, sizeNode, nil
}

// attributes reads a mapping of attribute values, sorted by key. A null mapping, or an
// empty one, reads as none.
func (d *decoder) attributes(n *yaml.Node, set fieldSet) (market.Attributes, error) {
	fs, err := d.fields(n, set)
	if err != nil {
		return nil, err
	}
	var out market.Attributes
	for _, f := range fs {
		v, err := d.str(f.val)
		if err != nil {
			return nil, err
		}
		out = append(out, market.Attribute{Key: f.key, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (d *decoder) gpu(n *yaml.Node) (*market.GPU, *yaml.Node, error) {
	present, unitsNode, units, attrs, err := d.unitsBlock(n, gpuKeys, d.gpuUnits, d.gpuAttributes)
	if err != nil || !present {
		return nil, nil, err
	}
	if units.Val > 0 && len(attrs) == 0 {
		return nil, nil, d.errorf(n, "GPU attributes are required when units > 0 (e.g. attributes: {vendor: {nvidia: [{model: a100}]}})")
	}
	return &market.GPU{Units: units, Attributes: attrs}, unitsNode, nil
}

// gpuAttributes turns the vendor/model list into Akash's attribute keys:
// "vendor/nvidia/model/<model>[/ram/<N>Gi][/interface/<pcie|sxm>]" = "true", or
// "vendor/nvidia/model/*" when no model is listed.
func (d *decoder) gpuAttributes(n *yaml.Node) (market.Attributes, error) {
	fs, present, err := d.optionalFields(n, gpuAttrKeys)
	if !present {
		return nil, err
	}
	var vendor *yaml.Node
	for _, f := range fs {
		if v, err := d.deref(f.val); err != nil {
			return nil, err
		} else if !v.IsNull() {
			vendor = f.val
		}
	}
	if vendor == nil {
		return nil, d.errorf(n, "GPU attributes need a vendor (vendor: {nvidia: [...]})")
	}
	vs, err := d.fields(vendor, vendorKeys)
	if err != nil {
		return nil, err
	}
	var out market.Attributes
	for _, v := range vs {
		models, err := d.structItems(v.val)
		if err != nil {
			return nil, err
		}
		for _, m := range models {
			key, err := d.nvidiaModel(m)
			if err != nil {
				return nil, err
			}
			out = append(out, market.Attribute{Key: key, Value: "true"})
		}
	}
	if len(out) == 0 {
		out = market.Attributes{{Key: "vendor/nvidia/model/*", Value: "true"}}
	}
	sort.Sort(byKey(out))
	if err := validateAttributes(out); err != nil {
		return nil, d.errorf(n, "invalid GPU attributes: %v", err)
	}
	return out, nil
}

func (d *decoder) nvidiaModel(n *yaml.Node) (string, error) {
	fs, err := d.fields(n, nvidiaKeys)
	if err != nil {
		return "", err
	}
	var model, ram, iface string
	for _, f := range fs {
		switch f.key {
		case "model":
			model, err = d.str(f.val)
		case "ram":
			var size uint64
			var v *yaml.Node
			if _, v, err = d.text(f.val, "a size"); err == nil && !v.IsNull() {
				size, err = d.bytes(f.val, true)
				ram = binarySize(size, "Gi")
			}
		case "interface":
			var v *yaml.Node
			if iface, v, err = d.text(f.val, "pcie or sxm"); err == nil && !v.IsNull() && iface != "pcie" && iface != "sxm" {
				err = d.errorf(f.val, "GPU interface %q is not pcie or sxm", iface)
			}
		}
		if err != nil {
			return "", err
		}
	}
	key := "vendor/nvidia/model/" + model
	if ram != "" {
		key += "/ram/" + ram
	}
	if iface != "" {
		key += "/interface/" + iface
	}
	return key, nil
}

// byKey sorts attributes by key with sort.Sort, as Akash does (the order of equal keys,
// which validation then rejects, is whatever that algorithm leaves).
type byKey market.Attributes

func (a byKey) Len() int           { return len(a) }
func (a byKey) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a byKey) Less(i, j int) bool { return a[i].Key < a[j].Key }

// validateAttributes applies Akash's rule for resource attribute keys: a letter, then
// 1–126 of [A-Za-z0-9_/.-], then optionally one of [A-Za-z0-9_*]; no duplicates.
func validateAttributes(attrs market.Attributes) error {
	seen := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		if !validAttributeKey(a.Key) {
			return fmt.Errorf("attribute key %q is not a letter followed by 1 to 127 letters, digits, '_', '/', '.', '-' (a final '*' allowed)", a.Key)
		}
		if seen[a.Key] {
			return fmt.Errorf("attribute key %q appears twice", a.Key)
		}
		seen[a.Key] = true
	}
	return nil
}

func validAttributeKey(k string) bool {
	middle := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/' || c == '.' || c == '-'
	}
	if len(k) < 2 || k[0]|0x20 < 'a' || k[0]|0x20 > 'z' {
		return false
	}
	rest := k[1:]
	switch last := rest[len(rest)-1]; {
	case last == '*':
		rest = rest[:len(rest)-1]
		if rest == "" || len(rest) > 126 {
			return false
		}
	case len(rest) > 127, len(rest) == 127 && (last == '/' || last == '.' || last == '-'):
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !middle(rest[i]) {
			return false
		}
	}
	return true
}

// storage reads a compute profile's volumes: a single mapping (the "default" volume) or
// a list. They are checked and sorted as Akash sorts them.
func (d *decoder) storage(n *yaml.Node) ([]volume, error) {
	v, err := d.deref(n)
	if err != nil || v.IsNull() {
		return nil, err
	}
	var vols []volume
	switch v.Kind {
	case yaml.SequenceNode:
		for _, item := range v.Content {
			vol, err := d.volume(item)
			if err != nil {
				return nil, err
			}
			if vol.Name == "" {
				vol.Name = market.StorageClassDefault
			}
			vols = append(vols, vol)
		}
	case yaml.MappingNode:
		vol, err := d.volume(v)
		if err != nil {
			return nil, err
		}
		vol.Name = market.StorageClassDefault
		vols = append(vols, vol)
	default:
		return nil, d.errorf(n, "expected a storage volume or a list of them, found %s", describe(v))
	}
	seen := make(map[string]bool, len(vols))
	for i := range vols {
		if seen[vols[i].Name] {
			return nil, d.errorf(vols[i].node, "storage volume name %q is used twice", vols[i].Name)
		}
		seen[vols[i].Name] = true
	}
	sortVolumes(vols)
	return vols, nil
}

func (d *decoder) volume(n *yaml.Node) (volume, error) {
	vol := volume{node: n}
	fs, err := d.fields(n, volumeKeys)
	if err != nil {
		return vol, err
	}
	for _, f := range fs {
		switch f.key {
		case "name":
			vol.Name, err = d.str(f.val)
		case "size":
			var size uint64
			size, err = d.bytes(f.val, false)
			vol.Size.Val = market.Uint(size)
		case "attributes":
			vol.Attributes, err = d.storageAttributes(f.val)
		}
		if err != nil {
			return vol, err
		}
	}
	return vol, nil
}

// storageAttributes reads a volume's class and persistence with Akash's rules:
// persistent defaults to false; a persistent volume without a class gets "default"; a
// class other than "ram" requires persistence; "ram" forbids it. Booleans are written
// true/false, yes/no or on/off, and are compared as written before that.
func (d *decoder) storageAttributes(n *yaml.Node) (market.Attributes, error) {
	fs, present, err := d.optionalFields(n, fieldSet{})
	if !present {
		return nil, err
	}
	attrs := make(map[string]string, len(fs)+1)
	for _, f := range fs {
		if attrs[f.key], err = d.str(f.val); err != nil {
			return nil, err
		}
	}
	if _, ok := attrs[market.StorageAttributePersistent]; !ok {
		attrs[market.StorageAttributePersistent] = "false"
	}
	persistent, class := attrs[market.StorageAttributePersistent], attrs[market.StorageAttributeClass]
	switch class {
	case "":
		if persistent == "true" {
			attrs[market.StorageAttributeClass] = market.StorageClassDefault
		}
	case market.StorageClassRAM:
		if persistent != "false" {
			return nil, d.errorf(n, "storage class \"ram\" cannot be persistent")
		}
	default:
		if persistent == "false" {
			return nil, d.errorf(n, "storage class %q needs persistent: true (only \"ram\" is not persistent)", class)
		}
	}
	for _, f := range fs {
		switch f.key {
		case market.StorageAttributePersistent, market.StorageAttributeClass:
		default:
			return nil, d.errorf(f.keyNod, "unsupported storage attribute %q (only class and persistent)", f.key)
		}
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(market.Attributes, 0, len(attrs))
	for _, k := range keys {
		v := attrs[k]
		switch k {
		case market.StorageAttributePersistent:
			switch v {
			case "true", "on", "yes":
				v = "true"
			case "false", "off", "no":
				v = "false"
			default:
				return nil, d.errorf(n, "persistent must be true or false, found %q", v)
			}
		case market.StorageAttributeClass:
			switch v {
			case market.StorageClassDefault, "beta1", "beta2", "beta3", market.StorageClassRAM:
			default:
				return nil, d.errorf(n, "unknown storage class %q (default, beta1, beta2, beta3 or ram)", v)
			}
		}
		out = append(out, market.Attribute{Key: k, Value: v})
	}
	return out, nil
}

// sortVolumes orders volumes as Akash does, with its comparison function and the same
// stable sort, since the order is part of the manifest and so of its version hash.
func sortVolumes(v []volume) {
	sort.SliceStable(v, func(i, j int) bool {
		if v[i].Size.Val != v[j].Size.Val {
			return v[i].Size.Val < v[j].Size.Val
		}
		ip, iok := nonEmpty(v[i].Attributes.Find(market.StorageAttributePersistent))
		jp, jok := nonEmpty(v[j].Attributes.Find(market.StorageAttributePersistent))
		if !iok && jok || iok && jok && ip < jp {
			return true
		} else if iok && !jok {
			return false
		}
		if !parseBool(ip) {
			return true
		} else if !parseBool(jp) {
			return false
		}
		return v[i].Name < v[j].Name
	})
}

func nonEmpty(s string, ok bool) (string, bool) { return s, ok && s != "" }

// parseBool is strconv.ParseBool without the error (false when invalid).
func parseBool(s string) bool {
	switch s {
	case "1", "t", "T", "true", "TRUE", "True":
		return true
	}
	return false
}

func (d *decoder) placementProfiles(n *yaml.Node, doc *document) error {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return err
	}
	doc.placements = make(map[string]*placementProfile, len(fs))
	for _, f := range fs {
		p := &placementProfile{name: f.key, keyNode: f.keyNod, pricingN: f.val}
		gs, err := d.fields(f.val, placementKeys)
		if err != nil {
			return err
		}
		for _, g := range gs {
			switch g.key {
			case "attributes":
				p.attributes, err = d.attributes(g.val, fieldSet{})
			case "signedBy":
				p.signedBy, err = d.signedBy(g.val)
			case "pricing":
				p.pricingN = g.val
				p.pricing, err = d.pricing(g.val)
			}
			if err != nil {
				return err
			}
		}
		doc.placements[f.key] = p
	}
	return nil
}

func (d *decoder) signedBy(n *yaml.Node) (market.SignedBy, error) {
	var s market.SignedBy
	fs, err := d.fields(n, signedByKeys)
	if err != nil {
		return s, err
	}
	for _, f := range fs {
		switch f.key {
		case "allOf":
			s.AllOf, err = d.strs(f.val)
		case "anyOf":
			s.AnyOf, err = d.strs(f.val)
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

func (d *decoder) pricing(n *yaml.Node) (map[string]price, error) {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]price, len(fs))
	for _, f := range fs {
		p := price{node: f.val}
		if v, err := d.deref(f.val); err != nil {
			return nil, err
		} else if !v.IsNull() {
			p.set = true
			if p.coin, err = d.coin(f.val); err != nil {
				return nil, err
			}
		}
		out[f.key] = p
	}
	return out, nil
}

// coin reads {amount, denom}: a positive decimal amount with at most 18 decimals.
func (d *decoder) coin(n *yaml.Node) (market.DecCoin, error) {
	var c market.DecCoin
	fs, err := d.fields(n, coinKeys)
	if err != nil {
		return c, err
	}
	amount, amountNode := "", n
	for _, f := range fs {
		switch f.key {
		case "amount":
			amountNode = f.val
			amount, err = d.str(f.val)
		case "denom":
			c.Denom, err = d.str(f.val)
		}
		if err != nil {
			return c, err
		}
	}
	if amount == "" {
		return c, d.errorf(amountNode, "a price needs an amount")
	}
	if c.Amount, err = market.ParseDec(amount); err != nil {
		return c, d.errorf(amountNode, "amount %v", err)
	}
	switch c.Amount.Sign() {
	case 0:
		return c, d.errorf(amountNode, "amount must be greater than 0")
	case -1:
		return c, d.errorf(amountNode, "amount %s is negative", amount)
	}
	return c, nil
}

func (d *decoder) deployments(n *yaml.Node, doc *document) error {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return err
	}
	doc.deployServices = make([]string, 0, len(fs))
	for _, f := range fs {
		doc.deployServices = append(doc.deployServices, f.key)
		gs, err := d.fields(f.val, fieldSet{})
		if err != nil {
			return err
		}
		if len(gs) == 0 {
			d.warnf(f.keyNod, "service %q is deployed nowhere (no placement under it)", f.key)
		}
		for _, g := range gs {
			dep := deployment{service: f.key, placement: g.key, serviceNode: f.keyNod, node: g.keyNod, profileNode: g.val, countNode: g.val}
			hs, err := d.fields(g.val, deploymentKeys)
			if err != nil {
				return err
			}
			for _, h := range hs {
				switch h.key {
				case "profile":
					dep.profileNode = h.val
					dep.profile, err = d.str(h.val)
				case "count":
					dep.countNode = h.val
					dep.count, err = d.uint32Field(h.val)
				}
				if err != nil {
					return err
				}
			}
			doc.deployments = append(doc.deployments, dep)
		}
	}
	// Akash walks services by name, then their placements by name.
	sort.Strings(doc.deployServices)
	sort.Slice(doc.deployments, func(i, j int) bool {
		a, b := doc.deployments[i], doc.deployments[j]
		if a.service != b.service {
			return a.service < b.service
		}
		return a.placement < b.placement
	})
	return nil
}

func (d *decoder) endpoints(n *yaml.Node, doc *document) error {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return err
	}
	doc.endpoints = make(map[string]*endpointDecl, len(fs))
	for _, f := range fs {
		e := &endpointDecl{name: f.key, keyNode: f.keyNod, kindNode: f.val}
		gs, err := d.fields(f.val, endpointKeys)
		if err != nil {
			return err
		}
		for _, g := range gs {
			e.kindNode = g.val
			if e.kind, err = d.str(g.val); err != nil {
				return err
			}
		}
		doc.endpoints[f.key] = e
		doc.endpointNames = append(doc.endpointNames, f.key)
	}
	sort.Strings(doc.endpointNames)
	return nil
}

func (d *decoder) reclamation(n *yaml.Node) (string, *yaml.Node, error) {
	fs, err := d.fields(n, reclamationKeys)
	if err != nil {
		return "", nil, err
	}
	for _, f := range fs {
		s, err := d.str(f.val)
		return s, f.val, err
	}
	return "", n, nil
}
