package inventory

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/testenv"
)

// cephClusterCRD stands in for Rook's CephCluster CRD (Rook's module is not served by
// the Go module proxy): the same group, version, kind and scope, and the status field
// the operator reads, status.ceph.capacity (bytesTotal, bytesUsed, bytesAvailable,
// lastUpdated, as Rook reports them).
func cephClusterCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "cephclusters.ceph.rook.io"},
		"spec": map[string]any{
			"group": "ceph.rook.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "CephCluster", "listKind": "CephClusterList", "plural": "cephclusters", "singular": "cephcluster"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

// TestCephClass: a ceph class sized from a Rook CephCluster's reported free space
// (÷ replicas, plus what bound claims hold), following the cluster's reports; without
// Rook's CRD the class is reported with the problem, and the rest is still published.
func TestCephClass(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ns := e.k.Namespace(t)
	class := e.prefix + "-ceph"
	cfg := e.cfg
	cfg.Storage = []inventory.StorageClass{{Class: class, Source: inventory.SourceCeph, CephCluster: ns + "/rook-ceph", Replicas: 3}}

	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := e.dc.Resource(crds).Get(ctx, "cephclusters.ceph.rook.io", metav1.GetOptions{}); err == nil {
		t.Fatal("the CephCluster CRD exists before the test made it")
	}
	stop := e.start(t, cfg)
	e.waitReport(t, cfg.Name, "the class reported without Rook", func(st *berthv1.InventoryStatus) error {
		s := storageOf(st, class)
		if s == nil || s.Capacity.Value() != 0 {
			return fmt.Errorf("class %+v", s)
		}
		for _, p := range st.Problems {
			if strings.Contains(p, "Ceph") && strings.Contains(p, "ceph.rook.io") {
				return nil
			}
		}
		return fmt.Errorf("no problem about Rook: %q", st.Problems)
	})
	stop()

	if _, err := e.dc.Resource(crds).Create(ctx, cephClusterCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.dc.Resource(crds).Delete(dctx, "cephclusters.ceph.rook.io", metav1.DeleteOptions{})
	})
	ceph := schema.GroupVersionResource{Group: "ceph.rook.io", Version: "v1", Resource: "cephclusters"}
	var cluster *unstructured.Unstructured
	testenv.EventuallyNoError(t, 20*time.Second, "the CephCluster created", func() error {
		var err error
		cluster, err = e.dc.Resource(ceph).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "metadata": map[string]any{"name": "rook-ceph"},
		}}, metav1.CreateOptions{})
		return err
	})
	report := func(available int64) {
		t.Helper()
		cluster.Object["status"] = map[string]any{"ceph": map[string]any{"capacity": map[string]any{
			"bytesTotal": available * 2, "bytesUsed": available, "bytesAvailable": available, "lastUpdated": time.Now().UTC().Format(time.RFC3339),
		}}}
		var err error
		if cluster, err = e.dc.Resource(ceph).Namespace(ns).UpdateStatus(ctx, cluster, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	report(3 << 40)
	e.boundClaim(t, ns, "data", class, "100Gi", nil)
	e.start(t, cfg)
	want := func(capacity int64) func(*berthv1.InventoryStatus) error {
		return func(st *berthv1.InventoryStatus) error {
			s := storageOf(st, class)
			if s == nil || s.Capacity.Value() != capacity || s.Used.Value() != 100<<30 || s.Message != "" {
				return fmt.Errorf("class %+v, want capacity %d", s, capacity)
			}
			return nil
		}
	}
	// 3Ti raw free ÷ 3 replicas + the 100Gi claim.
	e.waitReport(t, cfg.Name, "the class sized from the CephCluster", want(1<<40+100<<30))
	report(6 << 40)
	e.waitReport(t, cfg.Name, "the class following the CephCluster's report", want(2<<40+100<<30))
}
