package hostname

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// backend is a tenant's service: an HTTP server on 127.0.0.1 that says its name.
func backend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprintf(w, "%s %s", name, r.Host)
	}))
	t.Cleanup(s.Close)
	return s
}

// get sends a request for host through the ingress at addr.
func get(t *testing.T, addr, host string, body []byte) (int, string, error) {
	t.Helper()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	code, b, err := testenv.Do(http.DefaultClient, req)
	return code, string(b), err
}

// waitServed waits until a request for host through addr is answered with want.
func waitServed(t *testing.T, addr, host, want string) {
	t.Helper()
	testenv.EventuallyNoError(t, 30*time.Second, host+" served by "+want, func() error {
		code, body, err := get(t, addr, host, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.HasPrefix(body, want+" ") {
			return fmt.Errorf("HTTP %d %q", code, body)
		}
		return nil
	})
}

// TestRoutingThroughIngressController routes tenants' hostnames through a real
// ingress controller (Traefik, built by hack/ingress.sh) to services on 127.0.0.1:
// an exact and a wildcard hostname; the body-size limit of the http_options (as a
// Traefik Middleware); a conflicting lease gets no traffic until the holder lets go
// (migration); the probe sees the route ready, and unready when the service stops
// answering.
func TestRoutingThroughIngressController(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	k := testenv.Cluster(t)
	class := "berth-e2e-" + shortName(t.Name())[:8]
	ctl := k.IngressController(t, localenv.IngressControllerOptions{IngressClass: class})
	nsA, nsB := e.namespace(t), e.namespace(t)
	a, b := backend(t, "lease-a"), backend(t, "lease-b")
	k.LoopbackService(t, nsA, "web", 80, a.Listener.Addr().String())
	k.LoopbackService(t, nsB, "web", 80, b.Listener.Addr().String())

	cfg := testConfig(prov)
	cfg.Ingress = IngressConfig{Class: class, Annotations: AnnotationsTraefik}
	cfg.Health = HealthConfig{Mode: HealthProbe, Address: ctl.HTTPAddr, Path: "/", Interval: time.Second, Timeout: time.Second}
	e.start(t, cfg, nsA)

	small := func(h *berthv1.ProviderHost) { h.Spec.MaxBodySize = 1000 }
	h := e.createHost(t, nsA, "shop.e2e.test", "shop.e2e.test", lease(prov, 1), small)
	w := e.createHost(t, nsA, "host-wild", "*.wild.e2e.test", lease(prov, 1))
	waitServed(t, ctl.HTTPAddr, "shop.e2e.test", "lease-a")
	waitServed(t, ctl.HTTPAddr, "x.wild.e2e.test", "lease-a")
	got := e.waitPhase(t, nsA, h.Name, berthv1.HostReady)
	if !strings.Contains(got.Status.Message, "HTTP 200") {
		t.Errorf("ready message %q", got.Status.Message)
	}
	e.waitPhase(t, nsA, w.Name, berthv1.HostReady)

	// max_body_size: Traefik refuses a larger body; the wildcard's default allows it.
	if code, _, err := get(t, ctl.HTTPAddr, "shop.e2e.test", make([]byte, 2000)); err != nil || code != http.StatusRequestEntityTooLarge {
		t.Errorf("2000-byte body to a 1000-byte route: HTTP %d, %v", code, err)
	}
	if code, _, err := get(t, ctl.HTTPAddr, "shop.e2e.test", make([]byte, 900)); err != nil || code != http.StatusOK {
		t.Errorf("900-byte body: HTTP %d, %v", code, err)
	}
	mw, err := e.dc.Resource(MiddlewareResource).Namespace(nsA).Get(t.Context(), "berth-"+shortName("shop.e2e.test")+"-body", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(mw.Object, "spec", "buffering", "maxRequestBodyBytes"); n != 1000 {
		t.Errorf("Middleware body limit %d", n)
	}

	// Another lease claims the hostname: it gets no traffic.
	c := e.createHost(t, nsB, "shop.e2e.test", "shop.e2e.test", lease(prov, 2))
	e.waitPhase(t, nsB, c.Name, berthv1.HostConflict)
	if _, body, err := get(t, ctl.HTTPAddr, "shop.e2e.test", nil); err != nil || !strings.HasPrefix(body, "lease-a ") {
		t.Fatalf("during the conflict: %q, %v", body, err)
	}
	// The holder lets go (the tenant migrates the hostname): the other lease serves it.
	if err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(nsA).Delete(t.Context(), h.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServed(t, ctl.HTTPAddr, "shop.e2e.test", "lease-b")
	e.waitPhase(t, nsB, c.Name, berthv1.HostReady)

	// The service stops answering: the probe sees it. (Traefik, reloading after the
	// route's change of lease, may answer for a while as for a hostname it does not
	// route; the probe says that first, then that the service does not answer.)
	b.Close()
	e.waitPhaseSaying(t, nsB, c.Name, berthv1.HostUnready, "the service does not answer")
}

// TestRoutingThroughGateway routes a hostname through the same controller as a
// Gateway API implementation: the HTTPRoute attaches to the Gateway, which accepts it.
func TestRoutingThroughGateway(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	k := testenv.Cluster(t)
	suffix := shortName(t.Name())[:8]
	ctl := k.IngressController(t, localenv.IngressControllerOptions{IngressClass: "berth-gwi-" + suffix, GatewayClass: "berth-gw-" + suffix})
	ns := e.namespace(t)
	srv := backend(t, "lease-gw")
	k.LoopbackService(t, ns, "web", 80, srv.Listener.Addr().String())
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "public", "namespace": ns},
		"spec": map[string]any{"gatewayClassName": "berth-gw-" + suffix, "listeners": []any{map[string]any{
			"name": "http", "protocol": "HTTP", "port": int64(ctl.HTTPPort),
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}}},
	}}
	gwr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	if _, err := e.dc.Resource(gwr).Namespace(ns).Create(t.Context(), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(prov)
	cfg.Mode, cfg.Gateway = ModeGateway, GatewayConfig{Name: "public", Namespace: ns, SectionName: "http", Annotations: AnnotationsNone}
	e.start(t, cfg, ns)
	h := e.createHost(t, ns, "gw.e2e.test", "gw.e2e.test", lease(prov, 1))
	waitServed(t, ctl.HTTPAddr, "gw.e2e.test", "lease-gw")
	got := e.waitPhase(t, ns, h.Name, berthv1.HostReady)
	if !strings.Contains(got.Status.Message, "accepted") {
		t.Errorf("ready message %q", got.Status.Message)
	}
}
