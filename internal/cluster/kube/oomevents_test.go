package kube

import (
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
)

// TestContainerRuns: a lease pod's view sums its containers' restarts and keeps how each
// one's latest ended run did (the run that just ended before the one before it), with
// the memory limit an OOM event names; a pod being deleted, or not the provider's, has
// none.
func TestContainerRuns(t *testing.T) {
	id := market.LeaseID{Owner: "akash1oom", DSeq: 5, GSeq: 1, OSeq: 1, Provider: testOwner.Provider}
	now := time.Unix(1800000000, 0)
	ended := func(reason string, code int32, ago time.Duration, run string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, FinishedAt: metav1.NewTime(now.Add(-ago)), ContainerID: run}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: LeaseNamespace(id), Labels: testOwner.LeaseLabels(id)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}},
			{Name: "side"},
			{Name: "fresh"},
		}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: ended(ReasonOOMKilled, 137, time.Minute, "containerd://aaaabbbbccccddddeeee")}},
			{Name: "side", RestartCount: 1, State: corev1.ContainerState{Terminated: ended("Error", 2, time.Second, "containerd://1111")},
				LastTerminationState: corev1.ContainerState{Terminated: ended(ReasonOOMKilled, 137, 2*time.Hour, "containerd://0000")}},
			{Name: "fresh", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	v := newPodView(pod, testOwner)
	want := []containerExit{
		{ContainerExit: deploy.ContainerExit{Pod: "web-1", Container: "web", Reason: ReasonOOMKilled, ExitCode: 137, Time: now.Add(-time.Minute)}, id: "containerd://aaaabbbbccccddddeeee", limit: "64Mi"},
		{ContainerExit: deploy.ContainerExit{Pod: "web-1", Container: "side", Reason: "Error", ExitCode: 2, Time: now.Add(-time.Second)}, id: "containerd://1111"},
	}
	if v.restarts != 3 || len(v.exits) != len(want) {
		t.Fatalf("view: %d restarts, exits %+v; want 3 and %+v", v.restarts, v.exits, want)
	}
	for i := range want {
		if got := v.exits[i]; got.id != want[i].id || got.limit != want[i].limit || !sameExit(&got.ContainerExit, &want[i].ContainerExit) {
			t.Errorf("exit %d: %+v, want %+v", i, got, want[i])
		}
	}

	// Only the web container's kill is recent and an OOM: one event queued, named by
	// the pod and the run.
	r := newOOMRecorder(nil, testOwner, slog.New(slog.DiscardHandler))
	defer r.queue.ShutDown()
	r.now = func() time.Time { return now }
	r.observe(v)
	r.observe(v) // seen twice: queued once
	if n := r.queue.Len(); n != 1 {
		t.Fatalf("%d kills queued, want 1", n)
	}
	k, _ := r.queue.Get()
	if k.eventName() != "web-1.oom.aaaabbbbccccdddd" || k.lease != id || k.limit != "64Mi" || k.container != "web" {
		t.Errorf("queued %+v (event %s)", k, k.eventName())
	}
	r.queue.Done(k)
	// An hour later it is not recorded again: its event may have expired.
	r.now = func() time.Time { return now.Add(oomEventWindow) }
	r.observe(v)
	if n := r.queue.Len(); n != 0 {
		t.Errorf("a kill older than %s queued", oomEventWindow)
	}

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	other := pod.DeepCopy()
	other.Labels = ownership.Owner{Provider: "akash1other", ChainID: testOwner.ChainID}.LeaseLabels(market.LeaseID{Owner: "akash1oom", DSeq: 5, GSeq: 1, OSeq: 1, Provider: "akash1other"})
	for what, p := range map[string]*corev1.Pod{"being deleted": deleting, "another provider's": other} {
		if v := newPodView(p, testOwner); v.restarts != 0 || len(v.exits) != 0 {
			t.Errorf("a pod %s: %d restarts, exits %+v; want none", what, v.restarts, v.exits)
		}
		r.now = func() time.Time { return now }
		r.observe(newPodView(p, testOwner))
		if r.queue.Len() != 0 {
			t.Errorf("a pod %s: its kill queued", what)
		}
	}
}
