package sdl

import (
	"net/url"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/yaml"
)

// The services section: what each service runs and exposes.

type service struct {
	name        string
	keyNode     *yaml.Node
	image       string
	imageNode   *yaml.Node
	command     []string
	args        []string
	env         []string
	envNode     *yaml.Node
	expose      []expose
	params      *serviceParams
	credentials *credentials
}

type expose struct {
	port, as uint32
	portNode *yaml.Node
	proto    string
	protoNod *yaml.Node
	to       []exposeTo
	accept   []string
	acceptN  *yaml.Node
	http     httpOptions
}

type exposeTo struct {
	service string
	global  bool
	ip      string
	ipNode  *yaml.Node
}

type httpOptions struct {
	node                                                   *yaml.Node
	maxBodySize, readTimeout, sendTimeout, nextTries, next uint32
	nextCases                                              []string
	proxyBufferSize                                        uint32
	proxyBufferNode                                        *yaml.Node
}

type serviceParams struct {
	storage     []storageParam
	permissions *market.ServicePermissions
	tee         string
	teeNode     *yaml.Node
}

type storageParam struct {
	name     string
	keyNode  *yaml.Node
	mount    string
	readOnly bool
}

type credentials struct {
	host, email, username, password string
	hostN, usernameN, passwN        *yaml.Node
}

var (
	serviceKeys     = fieldSet{known: []string{"image", "command", "args", "env", "expose", "dependencies", "params", "credentials"}}
	exposeKeys      = fieldSet{known: []string{"port", "as", "proto", "to", "accept", "http_options"}}
	exposeToKeys    = fieldSet{known: []string{"service", "global", "http_options", "ip"}}
	httpOptionKeys  = fieldSet{known: []string{"max_body_size", "proxy_buffer_size", "read_timeout", "send_timeout", "next_tries", "next_timeout", "next_cases"}}
	dependencyKeys  = fieldSet{known: []string{"service"}}
	paramsKeys      = fieldSet{known: []string{"storage", "permissions", "tee"}}
	storageParamKey = fieldSet{known: []string{"mount", "readOnly"}}
	permissionsKeys = fieldSet{known: []string{"read"}}
	credentialsKeys = fieldSet{known: []string{"host", "email", "username", "password"}}
)

func (d *decoder) services(n *yaml.Node) (map[string]*service, error) {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*service, len(fs))
	for _, f := range fs {
		s, err := d.service(f)
		if err != nil {
			return nil, err
		}
		out[f.key] = s
	}
	return out, nil
}

func (d *decoder) service(f field) (*service, error) {
	s := &service{name: f.key, keyNode: f.keyNod, imageNode: f.val}
	fs, err := d.fields(f.val, serviceKeys)
	if err != nil {
		return nil, err
	}
	for _, g := range fs {
		switch g.key {
		case "image":
			s.imageNode = g.val
			s.image, err = d.str(g.val)
		case "command":
			s.command, err = d.strs(g.val)
		case "args":
			s.args, err = d.strs(g.val)
		case "env":
			s.envNode = g.val
			s.env, err = d.strs(g.val)
		case "expose":
			s.expose, err = d.exposes(g.val)
		case "dependencies":
			err = d.dependencies(g)
		case "params":
			s.params, err = d.params(g.val)
		case "credentials":
			s.credentials, err = d.credentials(g.val)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// dependencies are read (so they must be well formed) but have no effect on Akash.
func (d *decoder) dependencies(f field) error {
	items, err := d.structItems(f.val)
	if err != nil {
		return err
	}
	for _, it := range items {
		deps, err := d.fields(it, dependencyKeys)
		if err != nil {
			return err
		}
		for _, dep := range deps {
			if _, err := d.str(dep.val); err != nil {
				return err
			}
		}
	}
	if len(items) > 0 {
		d.warnf(f.keyNod, "dependencies have no effect: Akash providers start all services together")
	}
	return nil
}

// structItems reads the items of a list of mappings (null items dropped; see eachItem).
func (d *decoder) structItems(n *yaml.Node) ([]*yaml.Node, error) {
	var out []*yaml.Node
	_, err := d.eachItem(n, func(item, _ *yaml.Node) error {
		out = append(out, item)
		return nil
	})
	return out, err
}

func (d *decoder) exposes(n *yaml.Node) ([]expose, error) {
	items, err := d.structItems(n)
	if err != nil {
		return nil, err
	}
	out := make([]expose, 0, len(items))
	for _, it := range items {
		e := expose{portNode: it}
		fs, err := d.fields(it, exposeKeys)
		if err != nil {
			return nil, err
		}
		for _, g := range fs {
			switch g.key {
			case "port":
				e.portNode = g.val
				e.port, err = d.uint32Field(g.val)
			case "as":
				e.as, err = d.uint32Field(g.val)
			case "proto":
				e.protoNod = g.val
				e.proto, err = d.str(g.val)
			case "to":
				e.to, err = d.exposeTos(g.val)
			case "accept":
				e.acceptN = g.val
				e.accept, err = d.accept(g.val)
			case "http_options":
				e.http, err = d.httpOptions(g.val)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// accept reads the hostnames of an HTTP port; each must make a valid http:// URL.
func (d *decoder) accept(n *yaml.Node) ([]string, error) {
	hosts, err := d.strs(n)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		if _, err := url.ParseRequestURI("http://" + h); err != nil {
			return nil, d.errorf(n, "%q is not a valid hostname", h)
		}
	}
	return hosts, nil
}

func (d *decoder) exposeTos(n *yaml.Node) ([]exposeTo, error) {
	items, err := d.structItems(n)
	if err != nil {
		return nil, err
	}
	out := make([]exposeTo, 0, len(items))
	for _, it := range items {
		t := exposeTo{}
		fs, err := d.fields(it, exposeToKeys)
		if err != nil {
			return nil, err
		}
		for _, g := range fs {
			switch g.key {
			case "service":
				t.service, err = d.str(g.val)
			case "global":
				t.global, err = d.boolField(g.val)
			case "ip":
				t.ipNode = g.val
				t.ip, err = d.str(g.val)
			case "http_options":
				if _, err = d.httpOptions(g.val); err == nil {
					d.warnf(g.keyNod, "http_options under \"to\" have no effect on Akash; set them on the expose entry")
				}
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func (d *decoder) httpOptions(n *yaml.Node) (httpOptions, error) {
	h := httpOptions{node: n}
	fs, err := d.fields(n, httpOptionKeys)
	if err != nil {
		return h, err
	}
	for _, g := range fs {
		switch g.key {
		case "max_body_size":
			h.maxBodySize, err = d.uint32Field(g.val)
		case "proxy_buffer_size":
			h.proxyBufferNode = g.val
			h.proxyBufferSize, err = d.uint32Field(g.val)
		case "read_timeout":
			h.readTimeout, err = d.uint32Field(g.val)
		case "send_timeout":
			h.sendTimeout, err = d.uint32Field(g.val)
		case "next_tries":
			h.nextTries, err = d.uint32Field(g.val)
		case "next_timeout":
			h.next, err = d.uint32Field(g.val)
		case "next_cases":
			h.nextCases, err = d.strs(g.val)
		}
		if err != nil {
			return h, err
		}
	}
	return h, nil
}

func (d *decoder) params(n *yaml.Node) (*serviceParams, error) {
	fs, present, err := d.optionalFields(n, paramsKeys)
	if !present {
		return nil, err
	}
	p := &serviceParams{}
	for _, g := range fs {
		switch g.key {
		case "storage":
			p.storage, err = d.storageParams(g.val)
		case "permissions":
			p.permissions, err = d.permissions(g.val)
		case "tee":
			p.teeNode = g.val
			p.tee, err = d.str(g.val)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (d *decoder) storageParams(n *yaml.Node) ([]storageParam, error) {
	fs, err := d.fields(n, fieldSet{})
	if err != nil {
		return nil, err
	}
	out := make([]storageParam, 0, len(fs))
	for _, f := range fs {
		sp := storageParam{name: f.key, keyNode: f.keyNod}
		gs, err := d.fields(f.val, storageParamKey)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			switch g.key {
			case "mount":
				sp.mount, err = d.str(g.val)
			case "readOnly":
				sp.readOnly, err = d.boolField(g.val)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, sp)
	}
	return out, nil
}

func (d *decoder) permissions(n *yaml.Node) (*market.ServicePermissions, error) {
	fs, present, err := d.optionalFields(n, permissionsKeys)
	if !present {
		return nil, err
	}
	p := &market.ServicePermissions{}
	for _, g := range fs {
		if p.Read, err = d.strs(g.val); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (d *decoder) credentials(n *yaml.Node) (*credentials, error) {
	fs, present, err := d.optionalFields(n, credentialsKeys)
	if !present {
		return nil, err
	}
	c := &credentials{hostN: n, usernameN: n, passwN: n}
	for _, g := range fs {
		switch g.key {
		case "host":
			c.hostN = g.val
			c.host, err = d.str(g.val)
		case "email":
			c.email, err = d.str(g.val)
		case "username":
			c.usernameN = g.val
			c.username, err = d.str(g.val)
		case "password":
			c.passwN = g.val
			c.password, err = d.str(g.val)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}
