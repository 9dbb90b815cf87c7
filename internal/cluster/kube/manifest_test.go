package kube

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// TestManifestResource installs the CRDs into the real API server, stores a lease's
// Manifest, and reads it back: the same lease, version and group, and no registry
// password anywhere in what the API server holds. An invalid one is refused by the
// CRD's schema.
func TestManifestResource(t *testing.T) {
	kube := testenv.Cluster(t)
	ctx := t.Context()
	dc := withCRDs(t, kube)
	if err := InstallCRDs(ctx, dc); err != nil { // idempotent
		t.Fatal(err)
	}
	res, _, err := sdl.Parse([]byte(leaseSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	version := bytes.Repeat([]byte{0xab}, 32)
	routes := deploy.Routes{Hosts: []string{"web.example.com"}, IPs: []deploy.IPPort{{Endpoint: "front", Port: 443, Proto: "TCP"}}}
	m, err := NewManifest(testLease, testOwner, version, res.Manifest[0], routes)
	if err != nil {
		t.Fatal(err)
	}
	ns := kube.Namespace(t)
	m.Namespace = ns
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(berthv1.ManifestResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := dc.Resource(berthv1.ManifestResource).Namespace(ns).Get(ctx, ManifestName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := got.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"password":"p"`) {
		t.Fatalf("the registry password is stored in the Manifest: %s", raw)
	}
	var back berthv1.Manifest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &back); err != nil {
		t.Fatal(err)
	}
	id, v, g, err := ManifestLease(&back)
	if err != nil {
		t.Fatal(err)
	}
	if id != testLease || !bytes.Equal(v, version) || len(g.Services) != 3 || g.Services[1].Name != "web" ||
		g.Services[1].Credentials == nil || g.Services[1].Credentials.Username != "u" || g.Services[1].Credentials.Password != "" {
		t.Fatalf("read back %+v %x %+v", id, v, g)
	}
	if r := ManifestRoutes(&back); !slices.Equal(r.Hosts, routes.Hosts) || !slices.Equal(r.IPs, routes.IPs) {
		t.Fatalf("routes read back %+v, want %+v", r, routes)
	}
	// The schema refuses a Manifest without a valid version.
	m.Name, m.Spec.Version = "bad", "xyz"
	obj, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	_, err = dc.Resource(berthv1.ManifestResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.version") {
		t.Fatalf("an invalid Manifest: %v", err)
	}
}
