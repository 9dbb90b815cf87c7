package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/inventory/invtest"
	"berth.dev/berth/internal/localenv"
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
	updates := make(chan deploy.LeaseStatus, 1024)
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mon, err := NewMonitor(startCache(t, cs, dc, testOwner), cs, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), func(s deploy.LeaseStatus) {
		if s.Lease == monLease {
			updates <- s
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mon.WithHosts()
	defer testenv.Go(t, mon.Run)()
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

	await := func(what string, cond func(deploy.LeaseStatus) bool) deploy.LeaseStatus {
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
	svc := func(s deploy.LeaseStatus, name string) deploy.ServiceStatus {
		for _, x := range s.Services {
			if x.Name == name {
				return x
			}
		}
		return deploy.ServiceStatus{}
	}
	s := await("web and llm available, the worker's reason", func(s deploy.LeaseStatus) bool {
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
	await("the scheduling event", func(s deploy.LeaseStatus) bool {
		return slices.ContainsFunc(s.Events, func(e deploy.Event) bool { return e.Reason == "FailedScheduling" && e.Object == "Pod/worker-0" })
	})
	// The hostname operator's report on the lease's hostname shows in its status.
	hosts := dc.Resource(berthv1.ProviderHostResource).Namespace(LeaseNamespace(monLease))
	if _, err := hosts.Patch(ctx, "www.example.com", types.MergePatchType, []byte(`{"status":{"phase":"Ready","message":"reached"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	await("the hostname's status", func(s deploy.LeaseStatus) bool {
		return slices.Equal(s.Hosts, []deploy.HostStatus{{Hostname: "www.example.com", Service: "web", Phase: "Ready", Message: "reached"}})
	})
	// And the IP operator's on its port on a leased IP.
	ips := dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(LeaseNamespace(monLease))
	l, err := ips.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("ProviderLeasedIPs: %v, %v", l, err)
	}
	if _, err := ips.Patch(ctx, l.Items[0].GetName(), types.MergePatchType, []byte(`{"status":{"phase":"Assigned","ip":"192.0.2.7"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	await("the leased IP's status", func(s deploy.LeaseStatus) bool {
		return len(s.IPs) == 1 && s.IPs[0].IP == "192.0.2.7" && s.IPs[0].Phase == "Assigned" && s.IPs[0].Endpoint == "pub" && s.IPs[0].ExternalPort > 0
	})
	checkOOMReported(t, mon, updates, svc)
	s, _ = mon.Status(monLease)
	if got, ok := mon.Status(monLease); !ok || !sameStatus(got, s) {
		t.Fatalf("Status() %+v", got)
	}
	if err := d.Teardown(ctx, monLease); err != nil {
		t.Fatal(err)
	}
	await("the lease gone", func(s deploy.LeaseStatus) bool { return len(s.Services) == 0 })
	if _, ok := mon.Status(monLease); ok {
		t.Fatal("a torn-down lease still has a status")
	}
}

// checkOOMReported: the worker's pod (never scheduled, so no node writes its status)
// is given the status of a container killed at its memory limit and restarted twice.
// The lease's status counts the restarts and names the kill, and the monitor records
// the kill as one event of the pod, with the lease's labels, however often it sees it.
// (The worker's memory limit is its 1Gi and its 256Mi of RAM-backed /dev/shm.)
func checkOOMReported(t *testing.T, mon *Monitor, updates <-chan deploy.LeaseStatus, svc func(deploy.LeaseStatus, string) deploy.ServiceStatus) {
	t.Helper()
	ctx := t.Context()
	cs := testenv.Cluster(t).Clientset(t)
	ns := LeaseNamespace(monLease)
	killed := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	setStatus := func(restarts int32) {
		t.Helper()
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "worker-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "worker", Image: "busybox:1.36", RestartCount: restarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: ReasonOOMKilled, ExitCode: 137, FinishedAt: killed, ContainerID: "containerd://0123456789abcdef0123456789abcdef"}},
		}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(2)
	timeout := time.After(time.Minute)
	for done := false; !done; {
		select {
		case s := <-updates:
			w := svc(s, "worker")
			done = w.Restarts == 2 && w.LastExit != nil && slices.ContainsFunc(s.Events, func(e deploy.Event) bool { return e.Reason == ReasonOOMKilled })
			if done {
				want := deploy.ContainerExit{Pod: "worker-0", Container: "worker", Reason: ReasonOOMKilled, ExitCode: 137, Time: killed.Time}
				if !sameExit(w.LastExit, &want) {
					t.Errorf("worker's last exit %+v, want %+v", *w.LastExit, want)
				}
				if !slices.ContainsFunc(w.Errors, func(e string) bool { return strings.HasPrefix(e, "CrashLoopBackOff: ") }) {
					t.Errorf("worker's errors %q lack the crash loop", w.Errors)
				}
			}
		case <-timeout:
			s, _ := mon.Status(monLease)
			t.Fatalf("timed out waiting for the worker's restarts and its OOM kill among the events; last status %+v", s)
		}
	}
	// Seen again (a later restart, same last kill): still the one event.
	setStatus(3)
	testenv.EventuallyNoError(t, 30*time.Second, "3 restarts", func() error {
		if s, _ := mon.Status(monLease); svc(s, "worker").Restarts != 3 {
			return fmt.Errorf("worker: %+v", svc(s, "worker"))
		}
		return nil
	})
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + ReasonOOMKilled})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d OOMKilled events, want 1: %+v", len(list.Items), list.Items)
	}
	e := list.Items[0]
	if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != "worker-0" ||
		e.Message != "container worker was killed at its memory limit of 1280Mi (out of memory, exit code 137)" || !e.LastTimestamp.Equal(&killed) {
		t.Errorf("the OOM event: %s %s %s/%s %q at %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, e.LastTimestamp)
	}
	if id, ok := testOwner.LeaseOf(e.Labels); !ok || id != monLease {
		t.Errorf("the OOM event's labels %v do not name the lease and its provider", e.Labels)
	}
}
