package testenv_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// routed is how long a route may take to appear after its objects are created.
const routed = 30 * time.Second

// TestIngressControllerRoutes proves the ingress controller end to end: Ingresses of its
// class (a plain host and a wildcard, over HTTP and HTTPS) and HTTPRoutes of its Gateway
// class reach a test server on 127.0.0.1 through a selector-less Service and an
// EndpointSlice naming that address; unknown hosts get 404; Traefik's Middleware and
// ServersTransport, named in annotations, cap the request body and the wait for the
// backend's response.
func TestIngressControllerRoutes(t *testing.T) {
	kube := testenv.Cluster(t)
	suffix := randomSuffix(t)
	ctl := kube.IngressController(t, localenv.IngressControllerOptions{
		IngressClass: "berth-test-" + suffix,
		GatewayClass: "berth-test-" + suffix,
	})
	ns := kube.Namespace(t)

	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			// Answers when the proxy gives up (or the test ends), never on its own.
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprintf(w, "backend %s host=%s body=%d", suffix, r.Host, n)
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) }) // runs before backend.Close
	kube.LoopbackService(t, ns, "web", 80, backend.Listener.Addr().String())

	cs := kube.Clientset(t)
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ing := ingress(ns, "web", "berth-test-"+suffix, nil, "foo.example.test", "*.wild.example.test")
	if _, err := cs.NetworkingV1().Ingresses(ns).Create(t.Context(), ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ingress: %v", err)
	}

	want := func(host string) string { return fmt.Sprintf("backend %s host=%s body=0", suffix, host) }

	t.Run("Ingress", func(t *testing.T) {
		waitRouted(t, "http://"+ctl.HTTPAddr, "foo.example.test", want("foo.example.test"))
		// The wildcard matches exactly one label in front of its suffix, as the Ingress
		// API says.
		waitRouted(t, "http://"+ctl.HTTPAddr, "a.wild.example.test", want("a.wild.example.test"))
		expectStatus(t, http.MethodGet, "http://"+ctl.HTTPAddr, "b-2.wild.example.test", "", http.StatusOK)
		for _, host := range []string{"unknown.example.test", "wild.example.test", "a.b.wild.example.test", "foo.example.test.other"} {
			expectStatus(t, http.MethodGet, "http://"+ctl.HTTPAddr, host, "", http.StatusNotFound)
		}
		// HTTPS, on Traefik's default certificate (the Ingress names no secret).
		waitRouted(t, "https://"+ctl.HTTPSAddr, "foo.example.test", want("foo.example.test"))
		waitRouted(t, "https://"+ctl.HTTPSAddr, "c.wild.example.test", want("c.wild.example.test"))
	})

	t.Run("IngressOfAnotherClass", func(t *testing.T) {
		other := ingress(ns, "web-other", "berth-test-other-"+suffix, nil, "other.example.test")
		other.Name = "other"
		if _, err := cs.NetworkingV1().Ingresses(ns).Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ingress: %v", err)
		}
		// A route of this controller's class added after it proves the other one was
		// seen and skipped rather than not seen yet.
		mine := ingress(ns, "web", "berth-test-"+suffix, nil, "mine.example.test")
		mine.Name = "mine"
		if _, err := cs.NetworkingV1().Ingresses(ns).Create(t.Context(), mine, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ingress: %v", err)
		}
		waitRouted(t, "http://"+ctl.HTTPAddr, "mine.example.test", want("mine.example.test"))
		expectStatus(t, http.MethodGet, "http://"+ctl.HTTPAddr, "other.example.test", "", http.StatusNotFound)
	})

	t.Run("HTTPRoute", func(t *testing.T) {
		gw := obj("gateway.networking.k8s.io/v1", "Gateway", ns, "gw", map[string]any{
			"gatewayClassName": "berth-test-" + suffix,
			"listeners": []any{map[string]any{
				"name": "http", "protocol": "HTTP", "port": int64(ctl.HTTPPort),
				"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
			}},
		})
		route := obj("gateway.networking.k8s.io/v1", "HTTPRoute", ns, "web", map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw"}},
			"hostnames":  []any{"gw.example.test", "*.gwwild.example.test"},
			"rules": []any{map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
				"backendRefs": []any{map[string]any{"name": "web", "port": int64(80)}},
			}},
		})
		create(t, dc, gw, route)
		waitRouted(t, "http://"+ctl.HTTPAddr, "gw.example.test", want("gw.example.test"))
		waitRouted(t, "http://"+ctl.HTTPAddr, "x.gwwild.example.test", want("x.gwwild.example.test"))
		expectStatus(t, http.MethodGet, "http://"+ctl.HTTPAddr, "gwwild.example.test", "", http.StatusNotFound)
	})

	t.Run("BodySizeAndTimeoutAnnotations", func(t *testing.T) {
		limit := obj("traefik.io/v1alpha1", "Middleware", ns, "limit", map[string]any{
			"buffering": map[string]any{"maxRequestBodyBytes": int64(1024)},
		})
		fast := obj("traefik.io/v1alpha1", "ServersTransport", ns, "fast", map[string]any{
			"forwardingTimeouts": map[string]any{"responseHeaderTimeout": "300ms"},
		})
		create(t, dc, limit, fast)
		// Service-level settings are annotations of the Service, router-level ones of
		// the Ingress; both name the CRD objects as <namespace>-<name>@kubernetescrd.
		kube.LoopbackService(t, ns, "web-limited", 80, backend.Listener.Addr().String())
		svc, err := cs.CoreV1().Services(ns).Get(t.Context(), "web-limited", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Annotations = map[string]string{"traefik.ingress.kubernetes.io/service.serverstransport": ns + "-fast@kubernetescrd"}
		if _, err := cs.CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		limited := ingress(ns, "web-limited", "berth-test-"+suffix,
			map[string]string{"traefik.ingress.kubernetes.io/router.middlewares": ns + "-limit@kubernetescrd"},
			"limited.example.test")
		limited.Name = "limited"
		if _, err := cs.NetworkingV1().Ingresses(ns).Create(t.Context(), limited, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ingress: %v", err)
		}
		waitRouted(t, "http://"+ctl.HTTPAddr, "limited.example.test", want("limited.example.test"))
		expectStatus(t, http.MethodPost, "http://"+ctl.HTTPAddr, "limited.example.test", strings.Repeat("x", 1000), http.StatusOK)
		expectStatus(t, http.MethodPost, "http://"+ctl.HTTPAddr, "limited.example.test", strings.Repeat("x", 2000), http.StatusRequestEntityTooLarge)
		expectStatus(t, http.MethodGet, "http://"+ctl.HTTPAddr+"/slow", "limited.example.test", "", http.StatusGatewayTimeout)
		// The route without the annotations has neither limit.
		expectStatus(t, http.MethodPost, "http://"+ctl.HTTPAddr, "foo.example.test", strings.Repeat("x", 2000), http.StatusOK)
	})
}

// ingress is an Ingress of class with one rule per host, path "/" (Prefix), to port 80
// of service.
func ingress(ns, service, class string, annotations map[string]string, hosts ...string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: ns, Annotations: annotations},
		Spec:       networkingv1.IngressSpec{IngressClassName: &class},
	}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host: h,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: service, Port: networkingv1.ServiceBackendPort{Number: 80},
					}},
				}},
			}},
		})
	}
	return ing
}

func obj(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

// create creates namespaced objects of the kinds obj builds.
func create(t *testing.T, dc dynamic.Interface, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		gvr := gv.WithResource(strings.ToLower(o.GetKind()) + "s")
		if _, err := dc.Resource(gvr).Namespace(o.GetNamespace()).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// do sends one request to base (a URL of the controller) for host (as the Host header
// and, over HTTPS, the TLS server name), with body unless empty, and returns the status
// and the response body.
func do(ctx context.Context, method, base, host, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, base, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	// Traefik's default certificate is self-signed.
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	code, b, err := testenv.Do(client, req)
	return code, string(b), err
}

// waitRouted waits until a GET of base for host answers 200 with body want.
func waitRouted(t *testing.T, base, host, want string) {
	t.Helper()
	testenv.EventuallyNoError(t, routed, "route to "+host+" via "+base, func() error {
		code, body, err := do(t.Context(), http.MethodGet, base, host, "")
		if err != nil {
			return err
		}
		if code != http.StatusOK || body != want {
			return fmt.Errorf("%d %q, want 200 %q", code, body, want)
		}
		return nil
	})
}

// expectStatus sends one request and checks its status.
func expectStatus(t *testing.T, method, base, host, body string, want int) {
	t.Helper()
	code, got, err := do(t.Context(), method, base, host, body)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, base, host, err)
	}
	if code != want {
		t.Errorf("%s %s (Host %s, %d body bytes) = %d %q, want %d", method, base, host, len(body), code, got, want)
	}
}
