package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/ownership"
)

// The kubelet records no event when a container is killed at its memory limit: the pod's
// status says OOMKilled, and the events say only that the container started again. The
// OOM recorder writes that event into the lease's namespace, so that `lease events` and
// the status's recent events show it beside the kubelet's.
const (
	// ReasonOOMKilled is the event's reason (the runtime's word for the exit).
	ReasonOOMKilled = "OOMKilled"
	// oomEventWindow: a kill older than this is not recorded. The API server keeps
	// events an hour by default, so an event that expired is not made again by a
	// later look at the same pod.
	oomEventWindow = time.Hour
	// oomRetries is how many times one event's creation is tried before it is
	// reported and given up.
	oomRetries = 8
)

// oomKill is one run of a container that ended killed at its memory limit.
type oomKill struct {
	lease                          market.LeaseID
	ns, pod, container, run, limit string
	exitCode                       int32
	at                             int64 // Unix nanoseconds
}

// eventName is unique to the run: watching the pod again, or a second look after a
// restart of the provider, finds the event made.
func (k oomKill) eventName() string {
	run := k.run
	if _, id, ok := strings.Cut(run, "://"); ok {
		run = id
	}
	return k.pod + ".oom." + run[:min(len(run), 16)]
}

// oomRecorder turns the OOM kills the monitor's pod views report into events, one
// worker creating them off the informers' goroutines.
type oomRecorder struct {
	cs    kubernetes.Interface
	owner ownership.Owner
	log   *slog.Logger
	now   func() time.Time
	queue workqueue.TypedRateLimitingInterface[oomKill]
}

func newOOMRecorder(cs kubernetes.Interface, owner ownership.Owner, log *slog.Logger) *oomRecorder {
	return &oomRecorder{cs: cs, owner: owner, log: log, now: time.Now, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[oomKill](), workqueue.TypedRateLimitingQueueConfig[oomKill]{Name: "oom-events"})}
}

// observe queues the recent OOM kills of a lease's pod.
func (r *oomRecorder) observe(o any) {
	v, ok := o.(*podView)
	if !ok || v.lease == nil {
		return
	}
	for i := range v.exits {
		e := &v.exits[i]
		if e.Reason != ReasonOOMKilled || e.id == "" || r.now().Sub(e.Time) > oomEventWindow {
			continue
		}
		r.queue.Add(oomKill{lease: *v.lease, ns: v.Namespace, pod: v.Name, container: e.Container, run: e.id,
			limit: e.limit, exitCode: e.ExitCode, at: e.Time.UnixNano()})
	}
}

// run creates the queued events until ctx ends.
func (r *oomRecorder) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, r.queue.ShutDown)
	defer stop()
	for {
		k, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		err := r.record(ctx, k)
		switch {
		case err == nil, ctx.Err() != nil: // recorded, or stopping
			r.queue.Forget(k)
		case r.queue.NumRequeues(k) < oomRetries-1:
			r.queue.AddRateLimited(k)
		default:
			r.log.WarnContext(ctx, "could not record a container's OOM kill as an event; giving up", slog.String("lease", k.lease.String()),
				slog.String("pod", k.pod), slog.String("container", k.container), slog.Int("attempts", oomRetries), slog.Any("err", err))
			r.queue.Forget(k)
		}
		r.queue.Done(k)
	}
}

// record creates the event of one kill. Made already, or its namespace gone or going
// (the lease closed): nothing to do.
func (r *oomRecorder) record(ctx context.Context, k oomKill) error {
	at := metav1.NewTime(time.Unix(0, k.at))
	msg := fmt.Sprintf("container %s ran out of memory and was killed (exit code %d)", k.container, k.exitCode)
	if k.limit != "" {
		msg = fmt.Sprintf("container %s was killed at its memory limit of %s (out of memory, exit code %d)", k.container, k.limit, k.exitCode)
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: k.eventName(), Namespace: k.ns, Labels: r.owner.LeaseLabels(k.lease)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: k.ns, Name: k.pod,
			FieldPath: "spec.containers{" + k.container + "}"},
		Reason: ReasonOOMKilled, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "berth-provider"},
		FirstTimestamp: at, LastTimestamp: at, Count: 1,
		ReportingController: "berth.dev/provider", ReportingInstance: r.owner.Provider,
	}
	_, err := r.cs.CoreV1().Events(k.ns).Create(ctx, ev, metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	return fmt.Errorf("event %s/%s: %w", k.ns, ev.Name, err)
}
