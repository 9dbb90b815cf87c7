package kube

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/inventory/invtest"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// monLease is the monitor test's own lease (other tests' namespaces may still be
// terminating).
var monLease = market.LeaseID{Owner: "akash1tenant", DSeq: 43, GSeq: 1, OSeq: 1, Provider: "akash1provider"}

// TestMonitorReportsLeaseStatus deploys the multi-service lease and follows its status
// only through the monitor's notifications: web and llm become available, web's UDP
// port is forwarded from a node port, the worker's missing volume is reported as the
// reason it cannot run, and the teardown empties the status.
func TestMonitorReportsLeaseStatus(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	ctx := t.Context()
	addNodes(t, kube,
		localenv.NodeSpec{Name: "mon-cpu", CPU: "16", Memory: "64Gi"},
		invtest.Labelled(t, localenv.NodeSpec{Name: "mon-gpu", CPU: "32", Memory: "128Gi", GPUs: 4, GPUProduct: "NVIDIA-A100-SXM4-80GB"}),
	)
	nvidiaRuntimeClass(t, cs)
	d := newTestDeployer(t, kube) // installs the CRDs the monitor watches
	updates := make(chan cluster.LeaseStatus, 1024)
	mon, err := NewMonitor(cs, testOwner, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), func(s cluster.LeaseStatus) {
		if s.Lease == monLease {
			updates <- s
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mon.WithHosts(dc)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mon.Run(runCtx); err != nil {
			t.Error(err)
		}
	})
	defer wg.Wait()
	defer stop()
	<-mon.Synced()

	d.settings = Settings{Owner: testOwner, StorageClasses: map[string]string{"beta3": "fast-ssd"}, GPURuntimeClass: "nvidia"}
	res, _, err := sdl.Parse([]byte(leaseSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Deploy(ctx, monLease, bytes.Repeat([]byte{1}, 32), res.Manifest[0], routesOf(res.Manifest[0])); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), monLease) })

	await := func(what string, cond func(cluster.LeaseStatus) bool) cluster.LeaseStatus {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case s := <-updates:
				if cond(s) {
					return s
				}
			case <-timeout:
				s, _ := mon.Status(monLease)
				t.Fatalf("timed out waiting for %s; last status %+v", what, s)
			}
		}
	}
	svc := func(s cluster.LeaseStatus, name string) cluster.ServiceStatus {
		for _, x := range s.Services {
			if x.Name == name {
				return x
			}
		}
		return cluster.ServiceStatus{}
	}
	s := await("web and llm available, the worker's reason", func(s cluster.LeaseStatus) bool {
		web, llm, worker := svc(s, "web"), svc(s, "llm"), svc(s, "worker")
		return web.Available == 2 && llm.Available == 1 && len(web.Forwarded) == 2 && len(worker.Errors) > 0
	})
	if s.Ready {
		t.Fatal("ready although the worker is not running")
	}
	if f := svc(s, "web").Forwarded[0]; f.Port != 5000 || f.Proto != "UDP" || f.ExternalPort < 30000 {
		t.Fatalf("forwarded %+v", f)
	}
	if w := svc(s, "worker"); w.Total != 1 || w.Available != 0 || !strings.Contains(w.Errors[0], "Unschedulable") {
		t.Fatalf("worker %+v", w)
	}
	// The scheduler's event about the worker shows among the lease's recent events.
	await("the scheduling event", func(s cluster.LeaseStatus) bool {
		return slices.ContainsFunc(s.Events, func(e cluster.Event) bool { return e.Reason == "FailedScheduling" && e.Object == "Pod/worker-0" })
	})
	// The hostname operator's report on the lease's hostname shows in its status.
	hosts := dc.Resource(ProviderHostResource).Namespace(LeaseNamespace(monLease))
	if _, err := hosts.Patch(ctx, "www.example.com", types.MergePatchType, []byte(`{"status":{"phase":"Ready","message":"reached"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	await("the hostname's status", func(s cluster.LeaseStatus) bool {
		return slices.Equal(s.Hosts, []cluster.HostStatus{{Hostname: "www.example.com", Service: "web", Phase: "Ready", Message: "reached"}})
	})
	// And the IP operator's on its port on a leased IP.
	ips := dc.Resource(ProviderLeasedIPResource).Namespace(LeaseNamespace(monLease))
	l, err := ips.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("ProviderLeasedIPs: %v, %v", l, err)
	}
	if _, err := ips.Patch(ctx, l.Items[0].GetName(), types.MergePatchType, []byte(`{"status":{"phase":"Assigned","ip":"192.0.2.7"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	await("the leased IP's status", func(s cluster.LeaseStatus) bool {
		return len(s.IPs) == 1 && s.IPs[0].IP == "192.0.2.7" && s.IPs[0].Phase == "Assigned" && s.IPs[0].Endpoint == "pub" && s.IPs[0].ExternalPort > 0
	})
	s, _ = mon.Status(monLease)
	if got, ok := mon.Status(monLease); !ok || !sameStatus(got, s) {
		t.Fatalf("Status() %+v", got)
	}
	if err := d.Teardown(ctx, monLease); err != nil {
		t.Fatal(err)
	}
	await("the lease gone", func(s cluster.LeaseStatus) bool { return len(s.Services) == 0 })
	if _, ok := mon.Status(monLease); ok {
		t.Fatal("a torn-down lease still has a status")
	}
}
