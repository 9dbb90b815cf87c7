package testenv

import (
	"net"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/localenv"
)

// IngressController starts an ingress controller (Traefik, built by hack/ingress.sh)
// for this test, watching the shared control plane through an admin kubeconfig, and
// stops it when the test ends. opts.IngressClass is required (use a name unique to the
// test); Kubeconfig and Dir are filled in when empty. Without the binary the test is
// skipped (failed under CI=true).
func (cp *Kube) IngressController(t testing.TB, opts localenv.IngressControllerOptions) *localenv.IngressController {
	t.Helper()
	cp.helperDefaults(t, &opts.Kubeconfig, &opts.Dir, &opts.Restart)
	c, err := localenv.StartIngressController(t.Context(), opts)
	Require(t, err)
	stopWithTest(t, "ingress controller", c.Service)
	return c
}

// LoopbackService creates in namespace ns a Service named name without a selector, with
// one TCP port (named "http"), and an EndpointSlice for it whose one ready endpoint is
// backend, a 127.0.0.1:PORT address such as an httptest.Server's: an ingress controller
// routing to the Service sends its traffic there, and nowhere else. The namespace's
// deletion removes both.
//
// The slice's address type is FQDN, with "127.0.0.1" as the name: the API server
// refuses loopback addresses in Endpoints and in IPv4 EndpointSlices, but checks an FQDN
// address only for its syntax, and controllers that read EndpointSlices (Traefik does)
// dial the address as given. FQDN slices are deprecated; the API server's warning
// saying so is not printed.
func (cp *Kube) LoopbackService(t testing.TB, ns, name string, port int32, backend string) {
	t.Helper()
	host, p, err := net.SplitHostPort(backend)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("loopback service %s: backend %q is not a 127.0.0.1:PORT address", name, backend)
	}
	target, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("loopback service %s: backend port %q: %v", name, p, err)
	}
	cfg := cp.RESTConfig()
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}
	portName := "http"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: portName, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(int32(target)),
		}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	ready, proto, targetPort := true, corev1.ProtocolTCP, int32(target)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-loopback", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: name},
		},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{host},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &targetPort}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create endpoint slice for %s/%s: %v", ns, name, err)
	}
}
