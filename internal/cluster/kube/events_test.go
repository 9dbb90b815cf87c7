package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/testenv"
)

// TestEvents lists a lease namespace's events (the scheduler's, about the lease's
// pods), then follows them: an event created afterwards arrives, and again when its
// count grows. A consumer that fails stops the stream; an unknown lease is an error.
func TestEvents(t *testing.T) {
	kube := testenv.Cluster(t)
	ctx := t.Context()
	l := deployStreamsLease(t, kube)
	s := newTestStreams(t, kube)
	cs := kube.Clientset(t)
	scheduled := func(events []deploy.Event) bool {
		return slices.ContainsFunc(events, func(e deploy.Event) bool {
			return e.Reason == "Scheduled" && e.Object == "Pod/"+l.pods["db"][0] && e.Type == corev1.EventTypeNormal && e.Count >= 1
		})
	}

	t.Run("list", func(t *testing.T) {
		var last []deploy.Event
		eventually(t, "the scheduler's event about the db pod", func() bool {
			var c collected[deploy.Event]
			if err := s.Events(ctx, l.id, deploy.EventOptions{}, c.add); err != nil {
				t.Fatal(err)
			}
			last = c.all()
			return scheduled(last)
		})
		if !slices.IsSortedFunc(last, func(a, b deploy.Event) int { return a.Time.Compare(b.Time) }) {
			t.Fatalf("events not oldest first: %+v", last)
		}
	})

	t.Run("follow", func(t *testing.T) {
		var c collected[deploy.Event]
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		wg.Go(func() {
			if err := s.Events(runCtx, l.id, deploy.EventOptions{Follow: true}, c.add); err != nil {
				t.Error(err)
			}
		})
		eventually(t, "the current events", func() bool { return scheduled(c.all()) })

		m := marker(t)
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		ev, err := cs.CoreV1().Events(l.ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: strings.TrimSuffix(m, "-"), Namespace: l.ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: l.ns, Name: l.pods["web"][1]},
			Type:           corev1.EventTypeWarning, Reason: "BerthTest", Message: m + "created",
			Count: 2, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "berth-test"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ours := func(count int32) func() bool {
			return func() bool {
				return slices.ContainsFunc(c.all(), func(e deploy.Event) bool {
					return e.Message == m+"created" && e.Count == count && e.Reason == "BerthTest" &&
						e.Type == corev1.EventTypeWarning && e.Object == "Pod/"+l.pods["web"][1] && e.Time.Equal(now.Time)
				})
			}
		}
		eventually(t, "the new event", ours(2))
		ev.Count = 3
		if _, err := cs.CoreV1().Events(l.ns).Update(ctx, ev, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the event again, counted 3 times", ours(3))
		stop()
		wg.Wait()
		n := 0
		for _, e := range c.all() {
			if e.Message == m+"created" {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("our event delivered %d times, want once per version", n)
		}
	})

	t.Run("the consumer stops it", func(t *testing.T) {
		errStop := errors.New("enough")
		for _, follow := range []bool{false, true} {
			n := 0
			err := s.Events(ctx, l.id, deploy.EventOptions{Follow: follow}, func(deploy.Event) error {
				n++
				return errStop
			})
			if !errors.Is(err, errStop) || n != 1 {
				t.Fatalf("follow %v: err %v after %d events, want the consumer's after 1", follow, err, n)
			}
		}
	})

	t.Run("unknown lease", func(t *testing.T) {
		other := market.LeaseID{Owner: "akash1nobody", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
		if err := s.Events(ctx, other, deploy.EventOptions{Follow: true}, func(deploy.Event) error { return nil }); !errors.Is(err, deploy.ErrNoSuchLease) {
			t.Fatalf("err %v", err)
		}
	})
}
