package kube

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/ownership"
)

// TestRemoveFailedPods: only this provider's lease pods that failed long enough ago
// and that a ReplicaSet replaces are deleted — not another provider's, not a
// StatefulSet's or a bare pod, not a running one, not one that failed just now.
// (The filtering is the logic here; TestRBAC runs it against the real API server.)
func TestRemoveFailedPods(t *testing.T) {
	mine := testOwner.LeaseLabels(market.LeaseID{Owner: "akash1tenant", DSeq: 1, GSeq: 1, OSeq: 1, Provider: testOwner.Provider})
	theirs := ownership.LeaseLabels(market.LeaseID{Owner: "akash1tenant", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1other"}, testOwner.ChainID)
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	now := metav1.Now()
	pod := func(name string, labels map[string]string, kind string, phase corev1.PodPhase, failed metav1.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lease-ns", Labels: labels, CreationTimestamp: long, UID: types.UID("uid-" + name)},
			Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, LastTransitionTime: failed}}}}
		if kind != "" {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", UID: "owner", Controller: &yes}}
		}
		return p
	}
	cs := fake.NewClientset(
		pod("evicted", mine, "ReplicaSet", corev1.PodFailed, long),
		pod("just-failed", mine, "ReplicaSet", corev1.PodFailed, now),
		pod("running", mine, "ReplicaSet", corev1.PodRunning, long),
		pod("theirs", theirs, "ReplicaSet", corev1.PodFailed, long),
		pod("stateful", mine, "StatefulSet", corev1.PodFailed, long),
		pod("bare", mine, "", corev1.PodFailed, long),
	)
	d := &Deployer{cs: cs, owner: testOwner, log: slog.New(slog.DiscardHandler)}
	removed, err := d.RemoveFailedPods(t.Context(), 10*time.Minute)
	if err != nil || !slices.Equal(removed, []string{"lease-ns/evicted"}) {
		t.Fatalf("removed %v, %v", removed, err)
	}
	left, err := cs.CoreV1().Pods("lease-ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"bare", "just-failed", "running", "stateful", "theirs"}) {
		t.Fatalf("pods left: %v", names)
	}
	// With a TTL of 0 the one that failed just now goes too.
	if removed, err := d.RemoveFailedPods(t.Context(), 0); err != nil || !slices.Equal(removed, []string{"lease-ns/just-failed"}) {
		t.Fatalf("removed %v, %v", removed, err)
	}
}
