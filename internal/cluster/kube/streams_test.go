package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// streamsSDL is a lease with two services: web with two replicas, db with one.
//
//go:embed testdata/streams.sdl.yaml
var streamsSDL string

// streamsLease is a deployed streamsSDL lease whose pods run.
type streamsLease struct {
	id market.LeaseID
	ns string
	// pods are the running pods' names by service, sorted.
	pods map[string][]string
}

// deployStreamsLease deploys streamsSDL as a new lease (a random dseq: the namespace
// of a previous run may still be terminating) on a node of its own, waits until its
// three pods run, and tears it down when the test ends.
func deployStreamsLease(t *testing.T, kube *testenv.Kube) streamsLease {
	t.Helper()
	ctx := t.Context()
	dseq := mathrand.Uint64N(1 << 40)
	addNodes(t, kube, localenv.NodeSpec{Name: fmt.Sprintf("streams-%d", dseq)})
	d := newTestDeployer(t, kube)
	res, _, err := sdl.Parse([]byte(streamsSDL), sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := market.LeaseID{Owner: "akash1streams", DSeq: dseq, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
	t.Cleanup(func() { _ = d.Teardown(context.WithoutCancel(ctx), id) })
	if err := d.Deploy(ctx, id, bytes.Repeat([]byte{1}, 32), res.Manifest[0], routesOf(res.Manifest[0])); err != nil {
		t.Fatal(err)
	}
	l := streamsLease{id: id, ns: LeaseNamespace(id)}
	eventually(t, "the lease's 3 pods running", func() bool {
		l.pods = runningPods(t, kube, l.ns)
		return len(l.pods["web"]) == 2 && len(l.pods["db"]) == 1
	})
	return l
}

// runningPods are a namespace's running pods' names by service, sorted.
func runningPods(t *testing.T, kube *testenv.Kube, ns string) map[string][]string {
	t.Helper()
	pods, err := kube.Clientset(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Labels[LabelService]] = append(out[p.Labels[LabelService]], p.Name)
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

func newTestStreams(t *testing.T, kube *testenv.Kube) *Streams {
	t.Helper()
	s, err := NewStreams(kube.RESTConfig(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// marker is a prefix no other test writes.
func marker(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "marker-" + hex.EncodeToString(b[:]) + "-"
}

// collected gathers what a stream's callback receives, for polling.
type collected[T any] struct {
	mu  sync.Mutex
	got []T
}

func (c *collected[T]) add(v T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, v)
	return nil
}

func (c *collected[T]) all() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// unstartedPod adds to a lease's namespace a pod of service that never starts: it is
// bound to a node that does not exist, so no kubelet (nor kwok) runs it and its
// container has no status. It is deleted when the test ends.
func unstartedPod(t *testing.T, kube *testenv.Kube, ns, service string) string {
	t.Helper()
	cs := kube.Clientset(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: service + "-unstarted-", Namespace: ns,
			Labels: map[string]string{ownership.LabelManaged: "true", LabelService: service}},
		Spec: corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: service, Image: "example.invalid/never:1"}}},
	}
	got, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns).Delete(context.WithoutCancel(t.Context()), got.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return got.Name
}
