package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/testenv"
)

// TestLogs reads a lease's logs through the API server from kwok, which serves one
// shared file as every container's log: each pod has every line, so the test looks
// for lines of its own. It covers all services and one, the tail, following (new
// lines, and a pod that starts meanwhile), a consumer that stops, and the errors.
func TestLogs(t *testing.T) {
	kube := testenv.Cluster(t)
	ctx := t.Context()
	l := deployStreamsLease(t, kube)
	s := newTestStreams(t, kube)
	m := marker(t)
	kube.AppendContainerLog(t, m+"1", m+"2")

	// ours: the lines of this test, by pod.
	ours := func(lines []deploy.LogLine) map[string][]string {
		out := map[string][]string{}
		for _, ln := range lines {
			if strings.HasPrefix(ln.Message, m) {
				out[ln.Pod] = append(out[ln.Pod], strings.TrimPrefix(ln.Message, m))
			}
		}
		return out
	}
	services := func(lines []deploy.LogLine) map[string]string {
		out := map[string]string{}
		for _, ln := range lines {
			out[ln.Pod] = ln.Service
		}
		return out
	}

	t.Run("every service", func(t *testing.T) {
		var c collected[deploy.LogLine]
		if err := s.Logs(ctx, l.id, deploy.LogOptions{}, c.add); err != nil {
			t.Fatal(err)
		}
		got := ours(c.all())
		if len(got) != 3 {
			t.Fatalf("lines from %d pods, want 3: %v", len(got), got)
		}
		for pod, lines := range got {
			if !slices.Equal(lines, []string{"1", "2"}) {
				t.Errorf("pod %s: %v", pod, lines)
			}
		}
		want := map[string]string{l.pods["web"][0]: "web", l.pods["web"][1]: "web", l.pods["db"][0]: "db"}
		if got := services(c.all()); !maps.Equal(got, want) {
			t.Errorf("services by pod %v, want %v", got, want)
		}
	})

	t.Run("one service", func(t *testing.T) {
		var c collected[deploy.LogLine]
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"db"}}, c.add); err != nil {
			t.Fatal(err)
		}
		got := ours(c.all())
		if len(got) != 1 || !slices.Equal(got[l.pods["db"][0]], []string{"1", "2"}) {
			t.Fatalf("lines %v, want db's only", got)
		}
	})

	t.Run("several services", func(t *testing.T) {
		var c collected[deploy.LogLine]
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"db", "web"}}, c.add); err != nil {
			t.Fatal(err)
		}
		if got := ours(c.all()); len(got) != 3 {
			t.Fatalf("lines from %d pods, want web's 2 and db's 1: %v", len(got), got)
		}
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"db", "nope"}}, c.add); !errors.Is(err, deploy.ErrNoSuchService) {
			t.Errorf("a service the lease lacks among others: %v, want ErrNoSuchService", err)
		}
	})

	t.Run("tail", func(t *testing.T) {
		var c collected[deploy.LogLine]
		one := int64(1)
		if err := s.Logs(ctx, l.id, deploy.LogOptions{TailLines: &one}, c.add); err != nil {
			t.Fatal(err)
		}
		all := c.all()
		if len(all) != 3 {
			t.Fatalf("%d lines, want the last of each of 3 pods: %v", len(all), all)
		}
		for _, ln := range all {
			if ln.Message != m+"2" {
				t.Errorf("pod %s: last line %q, want %q", ln.Pod, ln.Message, m+"2")
			}
		}
	})

	t.Run("follow", func(t *testing.T) {
		var c collected[deploy.LogLine]
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		one := int64(1)
		wg.Go(func() {
			if err := s.Logs(runCtx, l.id, deploy.LogOptions{Follow: true, TailLines: &one}, c.add); err != nil {
				t.Error(err)
			}
		})
		eventually(t, "the last line from each pod", func() bool {
			got := ours(c.all())
			return len(got) == 3 && slices.Equal(got[l.pods["db"][0]], []string{"2"})
		})
		kube.AppendContainerLog(t, m+"3")
		eventually(t, "the new line from each pod", func() bool {
			got := ours(c.all())
			for _, lines := range got {
				if !slices.Equal(lines, []string{"2", "3"}) {
					return false
				}
			}
			return len(got) == 3
		})
		// A pod that starts while following is streamed from its first line.
		scale, err := kube.Clientset(t).AppsV1().Deployments(l.ns).GetScale(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 2
		if _, err := kube.Clientset(t).AppsV1().Deployments(l.ns).UpdateScale(ctx, "db", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new db pod's whole log", func() bool {
			got := ours(c.all())
			return len(got) == 4 && slices.ContainsFunc(c.all(), func(ln deploy.LogLine) bool {
				return ln.Service == "db" && ln.Pod != l.pods["db"][0] && ln.Message == m+"1"
			})
		})
		stop()
		wg.Wait()
		for pod, lines := range ours(c.all()) {
			if pod != l.pods["db"][0] && !slices.Contains(l.pods["web"], pod) {
				continue // the new pod: the whole file
			}
			if !slices.Equal(lines, []string{"2", "3"}) {
				t.Errorf("pod %s: %v, each line once", pod, lines)
			}
		}
	})

	t.Run("the consumer stops it", func(t *testing.T) {
		errStop := errors.New("enough")
		n := 0
		err := s.Logs(ctx, l.id, deploy.LogOptions{Follow: true}, func(deploy.LogLine) error {
			n++
			return errStop
		})
		if !errors.Is(err, errStop) || n != 1 {
			t.Fatalf("err %v after %d lines, want the consumer's after 1", err, n)
		}
	})

	// Last: the pod it adds would be missing from the others' counts.
	t.Run("a pod whose log cannot be read", func(t *testing.T) {
		running := runningPods(t, kube, l.ns)["db"] // follow added one
		unstartedPod(t, kube, l.ns, "db")
		// Without follow: the lines of the pods that run, then ErrLogUnreadable.
		var c collected[deploy.LogLine]
		err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"db"}}, c.add)
		if want := fmt.Sprintf("1 of %d pods", len(running)+1); !errors.Is(err, deploy.ErrLogUnreadable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want ErrLogUnreadable for %s", err, want)
		}
		got := ours(c.all())
		for _, pod := range running {
			if !slices.Equal(got[pod], []string{"1", "2", "3"}) {
				t.Errorf("pod %s: lines %v", pod, got[pod])
			}
		}
		if len(got) != len(running) {
			t.Fatalf("lines from %d pods, want the %d running", len(got), len(running))
		}
		// Following, a pod that has not started is waited for, not an error.
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var ferr error
		var fc collected[deploy.LogLine]
		wg.Go(func() {
			ferr = s.Logs(runCtx, l.id, deploy.LogOptions{Services: []string{"db"}, Follow: true}, fc.add)
		})
		eventually(t, "the running db pods' lines", func() bool { return len(ours(fc.all())) == len(running) })
		stop()
		wg.Wait()
		if ferr != nil {
			t.Fatalf("follow: %v", ferr)
		}
	})

	t.Run("errors", func(t *testing.T) {
		nop := func(deploy.LogLine) error { return nil }
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"nope"}}, nop); !errors.Is(err, deploy.ErrNoSuchService) {
			t.Errorf("unknown service: %v", err)
		}
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Services: []string{"web,x=y"}}, nop); !errors.Is(err, deploy.ErrNoSuchService) {
			t.Errorf("a selector as service: %v", err)
		}
		neg := int64(-1)
		if err := s.Logs(ctx, l.id, deploy.LogOptions{TailLines: &neg}, nop); !errors.Is(err, deploy.ErrInvalidRequest) {
			t.Errorf("negative tail: %v", err)
		}
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Previous: true, Follow: true}, nop); !errors.Is(err, deploy.ErrInvalidRequest) {
			t.Errorf("previous and follow: %v", err)
		}
		// No container of the lease has restarted: no ended run to read, and no error
		// (the real node's restart is TestRealNodeJourney's).
		var c collected[deploy.LogLine]
		if err := s.Logs(ctx, l.id, deploy.LogOptions{Previous: true}, c.add); err != nil || len(c.all()) != 0 {
			t.Errorf("previous, nothing restarted: %v, %d lines", err, len(c.all()))
		}
		other := market.LeaseID{Owner: "akash1nobody", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
		if err := s.Logs(ctx, other, deploy.LogOptions{}, nop); !errors.Is(err, deploy.ErrNoSuchLease) {
			t.Errorf("unknown lease: %v", err)
		}
	})
}
