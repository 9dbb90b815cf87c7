package hostname

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// AnnotationHostname is on every route the operator writes: the hostname it serves
// (a wildcard cannot be a label value).
const AnnotationHostname = "berth.dev/hostname"

// LabelComponent marks the routes as the hostname operator's.
const (
	LabelComponent = "berth.dev/component"
	componentName  = "hostname-operator"
)

// FieldManager is the operator's server-side apply field manager.
const FieldManager = "berth-hostname-operator"

// HTTPRouteResource is Gateway API's HTTPRoute.
var HTTPRouteResource = schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: "v1", Resource: "httproutes"}

// routeMeta is the metadata of h's route: named as h, in its namespace, with its
// lease's labels, owned by h (so that it goes when h goes).
func routeMeta(h *berthv1.ProviderHost, annotations map[string]string) metav1.ObjectMeta {
	labels := map[string]string{LabelComponent: componentName}
	for k, v := range h.Labels {
		if strings.HasPrefix(k, "berth.dev/") {
			labels[k] = v
		}
	}
	a := map[string]string{AnnotationHostname: h.Spec.Hostname}
	maps.Copy(a, annotations)
	return metav1.ObjectMeta{
		Name: h.Name, Namespace: h.Namespace, Labels: labels, Annotations: a,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: berthv1.GroupVersion.String(), Kind: "ProviderHost", Name: h.Name, UID: h.UID,
			Controller: new(true),
		}},
	}
}

// buildIngress is h's Ingress: one rule for its hostname, every path to its service's
// port.
func (c *Config) buildIngress(h *berthv1.ProviderHost) *networkingv1.Ingress {
	annotations := map[string]string{}
	switch c.Ingress.Annotations {
	case AnnotationsNginx:
		maps.Copy(annotations, nginxAnnotations("nginx.ingress.kubernetes.io", h))
	case AnnotationsTraefik:
		// Traefik reads no body size or retries from Ingress annotations: they are
		// its Middlewares, which the router names.
		if refs := traefikRouterMiddlewares(h, traefikMiddlewares(h)); refs != "" {
			annotations["traefik.ingress.kubernetes.io/router.middlewares"] = refs
		}
		if c.wantsTLS(h) {
			annotations["traefik.ingress.kubernetes.io/router.tls"] = "true"
		}
	}
	var tls []networkingv1.IngressTLS
	if c.wantsTLS(h) {
		key := "cert-manager.io/cluster-issuer"
		if c.TLS.IssuerKind == "Issuer" {
			key = "cert-manager.io/issuer"
		}
		annotations[key] = c.TLS.Issuer
		tls = []networkingv1.IngressTLS{{Hosts: []string{h.Spec.Hostname}, SecretName: h.Name + "-tls"}}
	}
	prefix := networkingv1.PathTypePrefix
	class := c.Ingress.Class
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: routeMeta(h, annotations),
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			TLS:              tls,
			Rules: []networkingv1.IngressRule{{
				Host: h.Spec.Hostname,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: h.Spec.Service, Port: networkingv1.ServiceBackendPort{Number: h.Spec.ExternalPort},
						}},
					}},
				}},
			}},
		},
	}
}

// wantsTLS: a cert-manager issuer is configured, and h is a tenant's own domain (or
// the provider's hostnames are included).
func (c *Config) wantsTLS(h *berthv1.ProviderHost) bool {
	if c.TLS.Issuer == "" {
		return false
	}
	d := c.IngressDomain
	own := d != "" && strings.HasSuffix(h.Spec.Hostname, "."+d)
	return !own || c.TLS.ProviderHosts
}

// buildHTTPRoute is h's HTTPRoute, attached to the configured Gateway.
func (c *Config) buildHTTPRoute(h *berthv1.ProviderHost) (*unstructured.Unstructured, error) {
	annotations := map[string]string{}
	if c.Gateway.Annotations == AnnotationsNginx {
		maps.Copy(annotations, ngfAnnotations(h))
	}
	group := gatewayv1.Group(gatewayv1.GroupName)
	kind := gatewayv1.Kind("Gateway")
	ns := gatewayv1.Namespace(c.Gateway.Namespace)
	parent := gatewayv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gatewayv1.ObjectName(c.Gateway.Name)}
	if c.Gateway.SectionName != "" {
		s := gatewayv1.SectionName(c.Gateway.SectionName)
		parent.SectionName = &s
	}
	prefix := gatewayv1.PathMatchPathPrefix
	port := h.Spec.ExternalPort
	route := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: routeMeta(h, annotations),
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(h.Spec.Hostname)},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: new("/")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(h.Spec.Service), Port: &port},
				}}},
			}},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(route)
	if err != nil {
		return nil, fmt.Errorf("HTTPRoute %s/%s: %w", h.Namespace, h.Name, err)
	}
	// Status is the gateway's; an apply must not claim it.
	delete(u, "status")
	return &unstructured.Unstructured{Object: u}, nil
}

// seconds is milliseconds rounded up to whole seconds, as nginx's timeouts take them.
func seconds(ms int64) string { return strconv.FormatInt((ms+999)/1000, 10) }

// nginxAnnotations are the SDL's http_options as ingress-nginx's annotations (under
// root), mapped as Akash's provider maps them. Options the manifest leaves at 0 are
// left to the ingress's defaults, except next_timeout, whose 0 means "no limit".
func nginxAnnotations(root string, h *berthv1.ProviderHost) map[string]string {
	s := &h.Spec
	a := map[string]string{root + "/proxy-next-upstream-timeout": seconds(s.NextTimeout)}
	if s.ReadTimeout > 0 {
		a[root+"/proxy-read-timeout"] = seconds(s.ReadTimeout)
	}
	if s.SendTimeout > 0 {
		a[root+"/proxy-send-timeout"] = seconds(s.SendTimeout)
	}
	if s.NextTries > 0 {
		a[root+"/proxy-next-upstream-tries"] = strconv.FormatInt(s.NextTries, 10)
	}
	if s.MaxBodySize > 0 {
		a[root+"/proxy-body-size"] = strconv.FormatInt(s.MaxBodySize, 10)
	}
	if s.ProxyBufferSize > 0 {
		a[root+"/proxy-buffer-size"] = strconv.FormatInt(int64(s.ProxyBufferSize), 10)
	}
	if cases := nextCases(s.NextCases); cases != "" {
		a[root+"/proxy-next-upstream"] = cases
	}
	return a
}

// ngfAnnotations are the options as NGINX Gateway Fabric's annotations, as Akash's
// provider writes them on HTTPRoutes.
func ngfAnnotations(h *berthv1.ProviderHost) map[string]string {
	s := &h.Spec
	a := map[string]string{}
	if s.MaxBodySize > 0 {
		a["nginx.org/client-max-body-size"] = strconv.FormatInt(s.MaxBodySize, 10)
	}
	if s.ReadTimeout > 0 {
		a["nginx.org/proxy-read-timeout"] = seconds(s.ReadTimeout)
	}
	if s.SendTimeout > 0 {
		a["nginx.org/proxy-send-timeout"] = seconds(s.SendTimeout)
	}
	if s.NextTimeout > 0 {
		a["nginx.org/proxy-next-upstream-timeout"] = seconds(s.NextTimeout) + "s"
	}
	if s.NextTries > 0 {
		a["nginx.org/proxy-next-upstream-tries"] = strconv.FormatInt(s.NextTries, 10)
	}
	if s.ProxyBufferSize > 0 {
		a["nginx.org/proxy-buffer-size"] = strconv.FormatInt(int64(s.ProxyBufferSize), 10)
	}
	if cases := nextCases(s.NextCases); cases != "" {
		a["nginx.org/proxy-next-upstream"] = cases
	}
	return a
}

// nextCases is nginx's proxy_next_upstream: the cases space-separated, HTTP codes as
// http_NNN. Only the known cases pass (the manifest was checked against them; the
// ProviderHost could have been edited): nothing else reaches nginx's configuration.
func nextCases(cases []string) string {
	var out []string
	for _, v := range cases {
		switch v {
		case "error", "timeout", "off":
			out = append(out, v)
		case "500", "502", "503", "504", "403", "404", "429":
			out = append(out, "http_"+v)
		}
	}
	return strings.Join(out, " ")
}

// ownedBy reports whether a route's labels are owner's.
func ownedBy(owner ownership.Owner, labels map[string]string) bool {
	return owner.Owns(labels) && labels[LabelComponent] == componentName
}

// MiddlewareResource is Traefik's Middleware, through which Traefik applies what
// ingress-nginx reads from annotations.
var MiddlewareResource = schema.GroupVersionResource{Group: "traefik.io", Version: "v1alpha1", Resource: "middlewares"}

// traefikMiddlewares are h's Traefik Middlewares by name: a request body limit
// (max_body_size) and retries on another replica (next_tries; Traefik retries on
// network errors, as next_cases' default "error timeout"). Traefik has no per-route
// read or send timeouts (they are the Service's ServersTransport, not the route's).
// A Middleware the options do not call for is nil: it is deleted.
func traefikMiddlewares(h *berthv1.ProviderHost) map[string]*unstructured.Unstructured {
	base := "berth-" + shortName(h.Spec.Hostname)
	mw := func(suffix string, spec map[string]any) *unstructured.Unstructured {
		m := routeMeta(h, nil)
		m.Name = base + "-" + suffix
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware", "spec": spec}}
		u.SetName(m.Name)
		u.SetNamespace(m.Namespace)
		u.SetLabels(m.Labels)
		u.SetAnnotations(m.Annotations)
		u.SetOwnerReferences(m.OwnerReferences)
		return u
	}
	out := map[string]*unstructured.Unstructured{base + "-body": nil, base + "-retry": nil}
	if s := h.Spec.MaxBodySize; s > 0 {
		out[base+"-body"] = mw("body", map[string]any{"buffering": map[string]any{"maxRequestBodyBytes": s}})
	}
	if t := h.Spec.NextTries; t > 1 && !slices.Contains(h.Spec.NextCases, "off") {
		out[base+"-retry"] = mw("retry", map[string]any{"retry": map[string]any{"attempts": t}})
	}
	return out
}

// traefikRouterMiddlewares is the Ingress annotation naming h's Middlewares.
func traefikRouterMiddlewares(h *berthv1.ProviderHost, mws map[string]*unstructured.Unstructured) string {
	var refs []string
	for _, name := range slices.Sorted(maps.Keys(mws)) {
		if mws[name] != nil {
			refs = append(refs, h.Namespace+"-"+name+"@kubernetescrd")
		}
	}
	return strings.Join(refs, ",")
}

// shortName is 12 hex digits of the hostname's SHA-256: a DNS-safe name part.
func shortName(h string) string {
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:6])
}
