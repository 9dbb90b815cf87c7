package testenv

import (
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
)

// APICalls records the requests made with a client configuration as the API server
// authorizes them ("verb group/resource[/subresource]" or "verb /path"): those it
// allowed (whatever the answer then was) and those it refused. RBAC tests run a
// component as its service account with it, to show that its role grants what it
// uses, and nothing more.
type APICalls struct {
	mu      sync.Mutex
	used    map[string]bool
	refused []string
}

// RecordAPICalls makes rc's clients (exec's websocket and SPDY connections too)
// report to the returned recorder.
func RecordAPICalls(rc *rest.Config) *APICalls {
	c := &APICalls{used: map[string]bool{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			verb, what := AuthorizedAs(req)
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case resp != nil && resp.StatusCode == http.StatusForbidden, err != nil && httpstream.IsUpgradeFailure(err):
				c.refused = append(c.refused, verb+" "+what)
			case resp != nil:
				c.used[verb+" "+what] = true
				// An apply that created the object was authorized as create too; so is
				// a websocket upgrade to exec (Kubernetes 1.35+).
				if resp.StatusCode == http.StatusCreated || (what == "pods/exec" && resp.StatusCode == http.StatusSwitchingProtocols) {
					c.used["create "+what] = true
				}
				// An informer starts with a streaming list (a watch that sends the
				// current objects first) where the API server offers one, and with a
				// LIST where it does not.
				if verb == "watch" && req.URL.Query().Get("sendInitialEvents") == "true" {
					c.used["list "+what] = true
				}
			}
			return resp, err
		})
	})
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Refused lists the distinct requests refused until now.
func (c *APICalls) Refused() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(c.refused)))
}

// RefusedErr says which requests were refused, if any were.
func (c *APICalls) RefusedErr() error {
	if r := c.Refused(); len(r) > 0 {
		return fmt.Errorf("requests refused to the service account: %q", r)
	}
	return nil
}

// CheckGrants fails t for each permission of granted (Granted's form) that was not
// used, and each request allowed that granted does not hold (Kubernetes' default
// roles allowed it), but discovery (every authenticated user's) when ignoreDiscovery
// is set. source names the grants in the messages ("config/rbac").
func (c *APICalls) CheckGrants(t testing.TB, granted map[string]bool, source string, ignoreDiscovery bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(granted)) {
		if !c.used[p] {
			t.Errorf("%s grants %q, which was not used", source, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.used)) {
		if verb, url, _ := strings.Cut(p, " "); ignoreDiscovery && verb == "get" && (url == "/api" || url == "/apis" || strings.HasPrefix(url, "/api/") || strings.HasPrefix(url, "/apis/")) {
			continue
		}
		if !granted[p] {
			t.Errorf("%q was used, which %s does not grant (Kubernetes' default roles did)", p, source)
		}
	}
}

// Granted is what rules grant, in the form APICalls records: "verb group/resource"
// and "verb /non-resource-url".
func Granted(rules ...rbacv1.PolicyRule) map[string]bool {
	granted := map[string]bool{}
	for _, rule := range rules {
		for _, verb := range rule.Verbs {
			for _, url := range rule.NonResourceURLs {
				granted[verb+" "+url] = true
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					granted[verb+" "+path.Join(g, res)] = true
				}
			}
		}
	}
	return granted
}

// AuthorizedAs is the verb and the resource (or non-resource path) the API server
// authorizes a request as.
func AuthorizedAs(req *http.Request) (verb, what string) {
	seg := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		group, seg = seg[1], seg[3:]
	default:
		return strings.ToLower(req.Method), req.URL.Path
	}
	if len(seg) >= 3 && seg[0] == "namespaces" {
		seg = seg[2:] // a namespaced resource
	}
	what, named := path.Join(group, seg[0]), len(seg) > 1
	if len(seg) > 2 {
		what += "/" + seg[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case named:
			verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	}
	return verb, what
}
