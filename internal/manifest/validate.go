package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/httpjson"
)

// MaxBytes bounds a manifest's JSON encoding (Akash: 16 KiB of SDL; a manifest of the
// largest SDL is well under this).
const MaxBytes = 1 << 20

// ErrInvalid marks every error of Decode, Validate and CheckGroup: the manifest cannot
// run as sent (a tenant error, never retried).
var ErrInvalid = errors.New("invalid manifest")

// ErrMalformed marks Decode's errors: the request body is not a manifest at all.
var ErrMalformed = errors.New("malformed manifest")

// Error is a manifest problem and where it is ("[0].services[1].expose[0].hosts[0]").
type Error struct {
	Path string
	Msg  string
	// Malformed: the JSON could not be read as a manifest.
	Malformed bool
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func (e *Error) Unwrap() []error {
	if e.Malformed {
		return []error{ErrInvalid, ErrMalformed}
	}
	return []error{ErrInvalid}
}

func malformed(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Malformed: true}
}

func errorf(p, format string, args ...any) *Error {
	return &Error{Path: p, Msg: fmt.Sprintf(format, args...)}
}

// Decode reads a manifest as tenants send it: the JSON array of groups. Unknown fields
// are refused, so a misspelt field is an error rather than silently dropped.
func Decode(data []byte) (market.Manifest, error) {
	if len(data) > MaxBytes {
		return nil, malformed("manifest is %d bytes, more than %d", len(data), MaxBytes)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var m market.Manifest
	if err := d.Decode(&m); err != nil {
		return nil, malformed("manifest is not a JSON array of groups: %s", httpjson.DecodeProblem(err))
	}
	if d.More() {
		return nil, malformed("data after the manifest's JSON array")
	}
	if m == nil {
		return nil, malformed("manifest is null; want a JSON array of groups")
	}
	return m, nil
}

// Validate checks a manifest's structure: at least one port exposed globally; groups
// named and unique; in each group at
// least one service, services sorted by name and unique; valid service names, an
// image, environment variable names, resources, storage mounts, credentials; ports in
// range with known protocols, sorted as Akash sorts them; a proxy buffer size within
// Akash's SDL limit; hostnames valid and accepted once in the whole manifest.
func Validate(m market.Manifest) error {
	if len(m) == 0 {
		return errorf("", "manifest has no groups")
	}
	groups := map[string]bool{}
	hosts := map[string]string{}
	global := false
	for gi := range m {
		g := &m[gi]
		gp := fmt.Sprintf("[%d]", gi)
		switch {
		case g.Name == "":
			return errorf(gp+".name", "group has no name")
		case groups[g.Name]:
			return errorf(gp+".name", "group %q appears twice", g.Name)
		case len(g.Services) == 0:
			return errorf(gp+".services", "group %q has no services", g.Name)
		}
		groups[g.Name] = true
		for si := range g.Services {
			s := &g.Services[si]
			sp := fmt.Sprintf("%s.services[%d]", gp, si)
			if si > 0 {
				switch prev := g.Services[si-1].Name; {
				case prev == s.Name:
					return errorf(sp+".name", "service %q appears twice in group %q", s.Name, g.Name)
				case prev > s.Name:
					return errorf(sp+".name", "services are not sorted by name: %q after %q", s.Name, prev)
				}
			}
			if err := validateService(sp, s, hosts); err != nil {
				return err
			}
			for i := range s.Expose {
				global = global || s.Expose[i].Global
			}
		}
	}
	if !global {
		return errorf("", "no service is reachable from outside: expose at least one port globally")
	}
	return nil
}

func validateService(sp string, s *market.Service, hosts map[string]string) error {
	switch {
	case !market.ValidServiceName(s.Name):
		return errorf(sp+".name", "service name %q must be lowercase letters, digits and '-', starting with a letter and not ending with '-'", s.Name)
	case strings.TrimSpace(s.Image) == "":
		return errorf(sp+".image", "service %q has no image", s.Name)
	case s.Count == 0:
		return errorf(sp+".count", "service %q has count 0; want at least 1", s.Name)
	}
	for i, env := range s.Env {
		name, _, _ := strings.Cut(env, "=")
		if !market.ValidEnvVarName(name) {
			return errorf(fmt.Sprintf("%s.env[%d]", sp, i), "environment variable name %q is invalid: letters, digits, '_', '-' and '.', not starting with a digit", name)
		}
	}
	if c := s.Credentials; c != nil {
		if c.Host == "" || c.Username == "" || c.Password == "" {
			return errorf(sp+".credentials", "service %q: registry credentials need host, username and password", s.Name)
		}
	}
	if err := validateResources(sp+".resources", s); err != nil {
		return err
	}
	if err := validateMounts(sp, s); err != nil {
		return err
	}
	for i := range s.Expose {
		e := &s.Expose[i]
		ep := fmt.Sprintf("%s.expose[%d]", sp, i)
		if i > 0 && market.CompareExpose(&s.Expose[i-1], e) > 0 {
			return errorf(ep, "ports are not sorted (by destination service, port, protocol, global first)")
		}
		if err := validateExpose(ep, e, hosts); err != nil {
			return err
		}
	}
	return nil
}

func validateResources(rp string, s *market.Service) error {
	r := &s.Resources
	switch {
	case r.ID == 0:
		return errorf(rp+".id", "service %q has resource unit id 0; ids start at 1", s.Name)
	case r.CPU == nil || r.CPU.Units.Val == 0:
		return errorf(rp+".cpu", "service %q requests no CPU", s.Name)
	case r.Memory == nil || r.Memory.Size.Val == 0:
		return errorf(rp+".memory", "service %q requests no memory", s.Name)
	}
	names := map[string]bool{}
	for i := range r.Storage {
		st := &r.Storage[i]
		if names[st.Name] {
			return errorf(fmt.Sprintf("%s.storage[%d].name", rp, i), "storage volume %q appears twice", st.Name)
		}
		names[st.Name] = true
		if st.Size.Val == 0 {
			return errorf(fmt.Sprintf("%s.storage[%d].size", rp, i), "storage volume %q has size 0", st.Name)
		}
	}
	return nil
}

func validateMounts(sp string, s *market.Service) error {
	if s.Params == nil {
		return nil
	}
	mounts := map[string]bool{}
	for i, p := range s.Params.Storage {
		pp := fmt.Sprintf("%s.params.storage[%d]", sp, i)
		found := slices.ContainsFunc(s.Resources.Storage, func(st market.Storage) bool { return st.Name == p.Name })
		switch {
		case !found:
			return errorf(pp+".name", "service %q mounts storage %q, which its resources do not list", s.Name, p.Name)
		case !path.IsAbs(p.Mount) || slices.Contains(strings.Split(p.Mount, "/"), ".."):
			return errorf(pp+".mount", "mount %q must be an absolute path without '..'", p.Mount)
		case mounts[path.Clean(p.Mount)]:
			return errorf(pp+".mount", "two volumes are mounted at %q", p.Mount)
		}
		mounts[path.Clean(p.Mount)] = true
	}
	return nil
}

func validateExpose(ep string, e *market.ServiceExpose, hosts map[string]string) error {
	switch {
	case e.Port == 0 || e.Port > math.MaxUint16:
		return errorf(ep+".port", "port %d is outside 1–65535", e.Port)
	case e.ExternalPort > math.MaxUint16:
		return errorf(ep+".externalPort", "external port %d is outside 0–65535", e.ExternalPort)
	case e.Proto != market.ProtoTCP && e.Proto != market.ProtoUDP:
		return errorf(ep+".proto", "protocol %q: want TCP or UDP", e.Proto)
	case e.Service != "" && !market.ValidServiceName(e.Service):
		return errorf(ep+".service", "destination service %q is not a valid service name", e.Service)
	case e.IP != "" && !market.ValidEndpointName(e.IP):
		return errorf(ep+".ip", "IP endpoint name %q is invalid", e.IP)
	case e.IP != "" && !e.Global:
		return errorf(ep+".ip", "IP endpoint %q on a port that is not global", e.IP)
	case e.HTTPOptions.ProxyBufferSize > market.MaxProxyBufferSize:
		return errorf(ep+".httpOptions.proxyBufferSize", "proxy buffer size %d is over the limit of %d bytes (1 MiB)", e.HTTPOptions.ProxyBufferSize, market.MaxProxyBufferSize)
	}
	// The options reach the ingress controller's configuration: only known values.
	if err := e.HTTPOptions.Validate(); err != nil {
		return errorf(ep+".httpOptions", "%v", err)
	}
	for i, h := range e.Hosts {
		hp := fmt.Sprintf("%s.hosts[%d]", ep, i)
		if !market.ValidHostPattern(h) {
			return errorf(hp, "hostname %q is not a valid lowercase DNS name (or a wildcard *.name.tld)", h)
		}
		if prev, ok := hosts[h]; ok {
			return errorf(hp, "hostname %q is accepted twice (first at %s); a hostname may be accepted once per deployment", h, prev)
		}
		hosts[h] = hp
	}
	return nil
}
