package kube

import (
	"context"
	_ "embed"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// proxyBufferSDL has two HTTP services: api sets http_options.proxy_buffer_size, web
// does not.
//
//go:embed testdata/proxy-buffer.sdl.yaml
var proxyBufferSDL string

func buildProxyBufferLease(t *testing.T, id market.LeaseID, in string) *LeaseObjects {
	t.Helper()
	res, _, err := sdl.Parse([]byte(in), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := BuildLease(id, res.Manifest[0], Settings{Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestProviderHostProxyBufferSize: the ProviderHost of a hostname carries its port's
// proxy buffer size when the SDL sets one, and none when it does not; the API server
// stores it as written, removes it when a later manifest drops it, and refuses a size
// the CRD's schema does not allow.
func TestProviderHostProxyBufferSize(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	dc := withCRDs(t, kube)
	id := market.LeaseID{Owner: "akash1tenant", DSeq: 4317, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	o := buildProxyBufferLease(t, id, proxyBufferSDL)
	ns := o.Namespace.Name
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{})
	})
	if err := Apply(ctx, cs, dc, o); err != nil {
		t.Fatal(err)
	}
	hosts := dc.Resource(berthv1.ProviderHostResource).Namespace(ns)
	// stored reads a ProviderHost's spec.proxyBufferSize from the API server.
	stored := func(name string) (int64, bool) {
		t.Helper()
		u, err := hosts.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("provider host %s: %v", name, err)
		}
		v, found, err := unstructured.NestedInt64(u.Object, "spec", "proxyBufferSize")
		if err != nil {
			t.Fatalf("provider host %s: spec.proxyBufferSize: %v", name, err)
		}
		return v, found
	}
	if v, found := stored("api.example.com"); !found || v != 32768 {
		t.Errorf("api.example.com: proxyBufferSize %d (present %v), want 32768", v, found)
	}
	if v, found := stored("www.example.com"); found {
		t.Errorf("www.example.com: proxyBufferSize %d, want none (the SDL does not set it)", v)
	}

	// A manifest update without it removes it: berth's field manager owned the field.
	updated := strings.Replace(proxyBufferSDL, "          proxy_buffer_size: 32768\n", "", 1)
	if err := Apply(ctx, cs, dc, buildProxyBufferLease(t, id, updated)); err != nil {
		t.Fatal(err)
	}
	if v, found := stored("api.example.com"); found {
		t.Errorf("after the update: proxyBufferSize %d, want none", v)
	}

	// The CRD's schema bounds the field to 1 byte – 1 MiB.
	for _, size := range []int32{market.MaxProxyBufferSize + 1, -1} {
		h := *o.Hosts[0]
		h.Spec.ProxyBufferSize = size
		err := applyObject(ctx, "provider host", &h, hosts.Patch)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.proxyBufferSize") {
			t.Errorf("proxy buffer size %d: %v, want the API server to refuse spec.proxyBufferSize", size, err)
		}
	}
}

// TestBuildLeaseProxyBufferSize: BuildLease copies an ingress port's proxy buffer size
// to each of its hostnames, and refuses one the ProviderHost CRD would refuse (a
// manifest that passed manifest.Validate never has one).
func TestBuildLeaseProxyBufferSize(t *testing.T) {
	res, _, err := sdl.Parse([]byte(proxyBufferSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Manifest[0]
	api := &g.Services[0].Expose[0]
	api.Hosts = append(api.Hosts, "*.api.example.com")
	tests := []struct {
		size    uint32
		want    int32
		wantErr string
	}{
		{0, 0, ""},
		{1, 1, ""},
		{32768, 32768, ""},
		{market.MaxProxyBufferSize, market.MaxProxyBufferSize, ""},
		{market.MaxProxyBufferSize + 1, 0, "service api: port 8080: proxy buffer size 1048577 is over the limit of 1048576 bytes"},
		{1<<32 - 1, 0, "service api: port 8080: proxy buffer size 4294967295 is over the limit of 1048576 bytes"},
	}
	for _, tt := range tests {
		api.HTTPOptions.ProxyBufferSize = tt.size
		o, err := BuildLease(testLease, g, Settings{Owner: testOwner})
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("size %d: error %v, want %q", tt.size, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("size %d: %v", tt.size, err)
		}
		got := map[string]int32{}
		for _, h := range o.Hosts {
			got[h.Spec.Hostname] = h.Spec.ProxyBufferSize
		}
		want := map[string]int32{"api.example.com": tt.want, "*.api.example.com": tt.want, "www.example.com": 0}
		if len(got) != len(want) {
			t.Fatalf("size %d: hosts %v", tt.size, got)
		}
		for h, w := range want {
			if got[h] != w {
				t.Errorf("size %d: %s has %d, want %d", tt.size, h, got[h], w)
			}
		}
	}
}
