package deploy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// ErrHostnameInUse reports a hostname another tenant's deployment holds.
var ErrHostnameInUse = errors.New("hostname in use")

// ErrMigration reports a hostname or endpoint migration that cannot be done: no such
// destination lease, or a name its manifest does not list.
var ErrMigration = errors.New("migration refused")

// ErrLeaseClosed reports a manifest for a lease that is closed or closing.
var ErrLeaseClosed = errors.New("lease closed")

// ErrStarting reports a manifest or migration before the manager has rebuilt from the
// cluster: until then it cannot know which deployment holds which route.
var ErrStarting = errors.New("the provider is starting; try again shortly")

// HostnameError says which hostname another tenant holds (never which tenant).
type HostnameError struct {
	Hostname string
}

func (e *HostnameError) Error() string {
	return fmt.Sprintf("hostname %q is used by another tenant", e.Hostname)
}

func (e *HostnameError) Unwrap() error { return ErrHostnameInUse }

// IPPort is a port on a tenant's leased IP: the SDL endpoint's name, and the port and
// protocol the world sees. A tenant's ports of one endpoint name share one IP.
type IPPort struct {
	Endpoint string
	Port     uint32
	Proto    string
}

// Routes are what the cluster routes to a lease from outside: hostnames through the
// ingress (ProviderHost) and ports on leased IPs (ProviderLeasedIP).
type Routes struct {
	Hosts []string
	IPs   []IPPort
}

// RoutesOf lists every route a group asks for: the hostnames of its HTTP ports and its
// ports on leased IPs.
func RoutesOf(g *market.ManifestGroup) Routes {
	var r Routes
	for i := range g.Services {
		for j := range g.Services[i].Expose {
			e := &g.Services[i].Expose[j]
			if e.IsIngress() {
				for _, h := range e.Hosts {
					if h = strings.ToLower(h); !slices.Contains(r.Hosts, h) {
						r.Hosts = append(r.Hosts, h)
					}
				}
			}
			if e.Global && e.IP != "" {
				p := IPPort{Endpoint: e.IP, Port: e.ExternalPortOrPort(), Proto: e.Proto}
				if !slices.Contains(r.IPs, p) {
					r.IPs = append(r.IPs, p)
				}
			}
		}
	}
	return r
}

// HasHost reports whether h (any case) is routed.
func (r Routes) HasHost(h string) bool { return slices.Contains(r.Hosts, strings.ToLower(h)) }

// intersect keeps the routes of r that o has too.
func (r Routes) intersect(o Routes) Routes {
	var out Routes
	for _, h := range r.Hosts {
		if o.HasHost(h) {
			out.Hosts = append(out.Hosts, h)
		}
	}
	for _, p := range r.IPs {
		if o.HasIP(p) {
			out.IPs = append(out.IPs, p)
		}
	}
	return out
}

// HasIP reports whether the port is routed.
func (r Routes) HasIP(p IPPort) bool { return slices.Contains(r.IPs, p) }

// Route keys: "host/NAME" for a hostname (one tenant's at a time, across tenants);
// "ip/OWNER/ENDPOINT/PROTO/PORT" for a leased IP port (IPs are per tenant, so keys of
// different tenants never meet).
func hostKey(h string) string { return "host/" + strings.ToLower(h) }

func ipKey(owner string, p IPPort) string {
	return "ip/" + owner + "/" + p.Endpoint + "/" + p.Proto + "/" + strconv.FormatUint(uint64(p.Port), 10)
}

func routeKeys(owner string, r Routes) []string {
	keys := make([]string, 0, len(r.Hosts)+len(r.IPs))
	for _, h := range r.Hosts {
		keys = append(keys, hostKey(h))
	}
	for _, p := range r.IPs {
		keys = append(keys, ipKey(owner, p))
	}
	return keys
}

// routeIndex records which lease holds each route, so that a hostname, or a port on a
// tenant's leased IP, reaches one deployment. A manifest may ask for a route another
// deployment of the same tenant holds: the route is withheld from it (not routed) until
// the tenant migrates it. Leases of one deployment pass routes between them freely (an
// update may move one from a group to another). Not safe for concurrent use (the
// Manager holds its lock).
type routeIndex struct {
	holder map[string]market.LeaseID
	// wants are the routes each lease's manifest asks for, held or withheld.
	wants map[market.LeaseID]Routes
	// pending are hostnames of manifests being recorded, held for their tenant until
	// the manifest is accepted or refused, so two tenants cannot both be told yes.
	pending map[string]pendingClaim
}

type pendingClaim struct {
	owner string
	n     int
}

func newRouteIndex() *routeIndex {
	return &routeIndex{holder: map[string]market.LeaseID{}, wants: map[market.LeaseID]Routes{}, pending: map[string]pendingClaim{}}
}

// check reports the first hostname of r another tenant holds, or is being given.
func (x *routeIndex) check(id market.LeaseID, r Routes) error {
	for _, h := range r.Hosts {
		if holder, ok := x.holder[hostKey(h)]; ok && holder.Owner != id.Owner {
			return &HostnameError{Hostname: h}
		}
		if p, ok := x.pending[hostKey(h)]; ok && p.owner != id.Owner {
			return &HostnameError{Hostname: h}
		}
	}
	return nil
}

// pend holds hostnames for owner while its manifest is recorded (check passed).
func (x *routeIndex) pend(owner string, hosts []string) {
	for _, h := range hosts {
		p := x.pending[hostKey(h)]
		p.owner = owner
		p.n++
		x.pending[hostKey(h)] = p
	}
}

// unpend releases what pend held.
func (x *routeIndex) unpend(owner string, hosts []string) {
	for _, h := range hosts {
		k := hostKey(h)
		if p, ok := x.pending[k]; ok && p.owner == owner {
			p.n--
			if p.n <= 0 {
				delete(x.pending, k)
			} else {
				x.pending[k] = p
			}
		}
	}
}

// preview is what set(id, r) would have the lease hold: the routes of r that are
// free or held within its deployment.
func (x *routeIndex) preview(id market.LeaseID, r Routes) Routes {
	var out Routes
	free := func(k string) bool {
		holder, ok := x.holder[k]
		return !ok || holder.Deployment() == id.Deployment()
	}
	for _, h := range r.Hosts {
		if free(hostKey(h)) {
			out.Hosts = append(out.Hosts, strings.ToLower(h))
		}
	}
	for _, p := range r.IPs {
		if free(ipKey(id.Owner, p)) {
			out.IPs = append(out.IPs, p)
		}
	}
	return out
}

// claim makes id the holder of routes it is known to have (rebuilt from the cluster).
func (x *routeIndex) claim(id market.LeaseID, r Routes) {
	for _, k := range routeKeys(id.Owner, r) {
		if _, ok := x.holder[k]; !ok {
			x.holder[k] = id
		}
	}
}

// set records the routes the lease asks for: it takes those free or held within its
// deployment; the others stay withheld. Routes it no longer asks for go to another
// lease that asks for them, or are freed. It returns the other leases that gained
// routes (to be applied again).
func (x *routeIndex) set(id market.LeaseID, r Routes) []market.LeaseID {
	keep := routeKeys(id.Owner, r)
	var dropped []string
	for _, k := range routeKeys(id.Owner, x.wants[id]) {
		if !slices.Contains(keep, k) && x.holder[k] == id {
			dropped = append(dropped, k)
		}
	}
	x.wants[id] = r
	for _, k := range keep {
		if holder, ok := x.holder[k]; !ok || holder.Deployment() == id.Deployment() {
			x.holder[k] = id
		}
	}
	return x.handOver(id, dropped)
}

// release frees every route the lease holds (handing each to another lease that asks
// for it) and forgets what it asks for. It returns the leases that gained routes.
func (x *routeIndex) release(id market.LeaseID) []market.LeaseID {
	var held []string
	for _, k := range routeKeys(id.Owner, x.wants[id]) {
		if x.holder[k] == id {
			held = append(held, k)
		}
	}
	delete(x.wants, id)
	return x.handOver(id, held)
}

// handOver gives each of keys, which from stops holding, to the first other lease (by
// ID) that asks for it — the tenant's deployment that had it withheld — or frees it.
func (x *routeIndex) handOver(from market.LeaseID, keys []string) []market.LeaseID {
	var gained []market.LeaseID
	for _, k := range keys {
		delete(x.holder, k)
		var next market.LeaseID
		found := false
		for id, w := range x.wants {
			if id == from || !slices.Contains(routeKeys(id.Owner, w), k) {
				continue
			}
			if !found || id.String() < next.String() {
				next, found = id, true
			}
		}
		if found {
			x.holder[k] = next
			if !slices.Contains(gained, next) {
				gained = append(gained, next)
			}
		}
	}
	return gained
}

// held are the routes of r the lease holds (what the cluster routes for it).
func (x *routeIndex) held(id market.LeaseID) Routes {
	var out Routes
	w := x.wants[id]
	for _, h := range w.Hosts {
		if x.holder[hostKey(h)] == id {
			out.Hosts = append(out.Hosts, h)
		}
	}
	for _, p := range w.IPs {
		if x.holder[ipKey(id.Owner, p)] == id {
			out.IPs = append(out.IPs, p)
		}
	}
	return out
}

// hostHolder is the lease holding hostname h.
func (x *routeIndex) hostHolder(h string) (market.LeaseID, bool) {
	id, ok := x.holder[hostKey(h)]
	return id, ok
}

// move gives keys to dest and returns the leases that lost some.
func (x *routeIndex) move(keys []string, dest market.LeaseID) map[market.LeaseID]bool {
	from := map[market.LeaseID]bool{}
	for _, k := range keys {
		if holder, ok := x.holder[k]; ok && holder != dest {
			from[holder] = true
		}
		x.holder[k] = dest
	}
	return from
}
