package chaos

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/gateway/client"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/wait"
)

// lifecycleSDL is each lifecycle's deployment: one web service, its image tagged with
// the lifecycle and version, so that every manifest version differs.
//
//go:embed lifecycle.sdl.yaml
var lifecycleSDL string

// lifecycle is one tenant deployment's life with one provider.
type lifecycle struct {
	n        int
	dseq     uint64
	provider *providerProc
	lease    market.LeaseID
	// acks are the manifest versions the provider answered 200 (each must run).
	acks int
	// identity of the lease's namespace and workload once ready: no other provider
	// may replace them.
	nsUID, depUID types.UID
	took          time.Duration
}

// steps of a lifecycle, for the report of where one failed.
func (w *world) runLifecycle(ctx context.Context, l *lifecycle) error {
	start := time.Now()
	tenant, err := w.keys.Show(tenantKey)
	if err != nil {
		return err
	}
	signer, err := w.keys.Signer(tenantKey)
	if err != nil {
		return err
	}
	id := market.DeploymentID{Owner: tenant.Address, DSeq: l.dseq}
	v1, err := lifecycleDeployment(l.n, 1)
	if err != nil {
		return err
	}
	// Create the deployment (once, whatever the ledger's outages).
	if err := w.txOnce(ctx, &ledger.MsgCreateDeployment{ID: id, Groups: v1.Groups, Version: v1.Version, Deposit: market.Coin{Denom: "uakt", Amount: 5_000_000}},
		func(ctx context.Context) (bool, error) { return w.deploymentExists(ctx, id) }); err != nil {
		return fmt.Errorf("create deployment %d: %w", l.dseq, err)
	}
	// The chosen provider's bid, then the lease.
	order := market.OrderID{Owner: id.Owner, DSeq: id.DSeq, GSeq: 1, OSeq: 1}
	bid := order.Bid(l.provider.addr)
	if err := w.waitFor(ctx, w.cfg.BidTimeout, l.provider.name+"'s bid on deployment "+fmt.Sprint(l.dseq), func(ctx context.Context) (bool, error) {
		var b ledger.Bid
		err := ledger.QueryBid.Into(ctx, w.client, ledger.BidRequest{ID: bid}, &b)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, nil
		}
		return err == nil && b.State == ledger.BidOpen, err
	}); err != nil {
		return err
	}
	l.lease = bid.Lease()
	if err := w.txOnce(ctx, &ledger.MsgCreateLease{BidID: bid}, func(ctx context.Context) (bool, error) {
		_, ok, err := w.leaseState(ctx, l.lease)
		return ok, err
	}); err != nil {
		return fmt.Errorf("create lease %s: %w", l.lease, err)
	}
	gw, err := l.provider.gateway(signer, tenant.Address)
	if err != nil {
		return err
	}
	// The manifest; once answered 200 it must run.
	if err := w.sendManifest(ctx, gw, l, v1); err != nil {
		return err
	}
	if err := w.waitRunning(ctx, gw, l, 1); err != nil {
		return err
	}
	if l.provider != w.providers[providerNames[0]] {
		if err := w.retry(ctx, func(ctx context.Context) (err error) {
			l.nsUID, l.depUID, err = w.identity(ctx, l.lease)
			return err
		}); err != nil {
			return err
		}
	}
	// An update.
	v2, err := lifecycleDeployment(l.n, 2)
	if err != nil {
		return err
	}
	if err := w.txOnce(ctx, &ledger.MsgUpdateDeployment{ID: id, Version: v2.Version}, func(ctx context.Context) (bool, error) {
		var d ledger.DeploymentResponse
		err := ledger.QueryDeployment.Into(ctx, w.client, ledger.DeploymentRequest{ID: id}, &d)
		return err == nil && bytes.Equal(d.Deployment.Version, v2.Version), err
	}); err != nil {
		return fmt.Errorf("update deployment %d: %w", l.dseq, err)
	}
	if err := w.sendManifest(ctx, gw, l, v2); err != nil {
		return err
	}
	if err := w.waitRunning(ctx, gw, l, 2); err != nil {
		return err
	}
	// Still ours, untouched by the other provider.
	if l.nsUID != "" {
		var ns, dep types.UID
		if err := w.retry(ctx, func(ctx context.Context) (err error) {
			ns, dep, err = w.identity(ctx, l.lease)
			return err
		}); err != nil {
			return err
		}
		if ns != l.nsUID || dep != l.depUID {
			return &violation{kind: "another provider touched a lease", detail: fmt.Sprintf("lease %s of %s: its namespace or workload was replaced", l.lease, l.provider.name)}
		}
	}
	// The lease is healthy: it must still be active.
	var state ledger.Lease
	if err := w.retry(ctx, func(ctx context.Context) (err error) {
		state, _, err = w.leaseState(ctx, l.lease)
		return err
	}); err != nil {
		return err
	}
	if state.State != ledger.LeaseActive {
		return &violation{kind: "healthy lease closed", detail: fmt.Sprintf("lease %s is %s (%s) before its tenant closed it", l.lease, state.State, state.Reason)}
	}
	// Close; the provider tears the lease down.
	if err := w.txOnce(ctx, &ledger.MsgCloseDeployment{ID: id}, func(ctx context.Context) (bool, error) {
		var d ledger.DeploymentResponse
		err := ledger.QueryDeployment.Into(ctx, w.client, ledger.DeploymentRequest{ID: id}, &d)
		return err == nil && d.Deployment.State != ledger.DeploymentActive, err
	}); err != nil {
		return fmt.Errorf("close deployment %d: %w", l.dseq, err)
	}
	if err := w.waitFor(ctx, w.cfg.StepTimeout, "lease "+l.lease.String()+" torn down", func(ctx context.Context) (bool, error) {
		ns, err := w.cs.CoreV1().Namespaces().Get(ctx, kube.LeaseNamespace(l.lease), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && ns.DeletionTimestamp != nil, err
	}); err != nil {
		return err
	}
	l.took = time.Since(start)
	return nil
}

// lifecycleDeployment is lifecycle n's deployment at version v.
func lifecycleDeployment(n, v int) (*sdl.Result, error) {
	r, _, err := sdl.Parse(fmt.Appendf(nil, lifecycleSDL, n, v), sdl.Options{})
	if err != nil {
		return nil, fmt.Errorf("lifecycle %d SDL: %w", n, err)
	}
	return r, nil
}

// sendManifest sends the manifest (the client asks again while the provider is down
// or restarting); a 200 is counted: that manifest must now run.
func (w *world) sendManifest(ctx context.Context, gw *client.Client, l *lifecycle, r *sdl.Result) error {
	sctx, cancel := context.WithTimeout(ctx, w.cfg.StepTimeout)
	defer cancel()
	if err := gw.SendManifest(sctx, l.dseq, r.Manifest); err != nil {
		var re *client.ResponseError
		if errors.As(err, &re) {
			return &violation{kind: "manifest refused", detail: fmt.Sprintf("lease %s: %v", l.lease, err)}
		}
		return fmt.Errorf("send the manifest of lease %s to %s: %w", l.lease, l.provider.name, err)
	}
	l.acks++
	return nil
}

// waitRunning waits until the lease runs version v of its manifest: its workload has
// that image and the lease status says every replica is available.
func (w *world) waitRunning(ctx context.Context, gw *client.Client, l *lifecycle, v int) error {
	image := fmt.Sprintf("nginx:1.27-chaos-%d-v%d", l.n, v)
	// seen is what the last look found, for the report when the wait times out: it
	// tells whether berth did not apply the version or the cluster did not roll it out.
	seen, applied := "no Deployment yet", false
	err := w.waitFor(ctx, w.cfg.StepTimeout, fmt.Sprintf("lease %s running version %d", l.lease, v), func(ctx context.Context) (bool, error) {
		dep, err := w.cs.AppsV1().Deployments(kube.LeaseNamespace(l.lease)).Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		applied = len(dep.Spec.Template.Spec.Containers) > 0 && dep.Spec.Template.Spec.Containers[0].Image == image
		seen = fmt.Sprintf("Deployment with version %d applied: %t; generation %d, observed %d; replicas updated %d, available %d",
			v, applied, dep.Generation, dep.Status.ObservedGeneration, dep.Status.UpdatedReplicas, dep.Status.AvailableReplicas)
		if !applied || dep.Status.ObservedGeneration != dep.Generation || dep.Status.UpdatedReplicas != 1 || dep.Status.AvailableReplicas != 1 {
			return false, nil
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		raw, err := gw.LeaseStatus(sctx, l.lease)
		if err != nil {
			seen += "; the lease status does not answer: " + err.Error()
			return false, nil // the provider may be restarting: look again
		}
		var st struct {
			Services map[string]struct {
				Available, Total int
			} `json:"services"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return false, fmt.Errorf("lease status: %w", err)
		}
		s, ok := st.Services["web"]
		seen += fmt.Sprintf("; lease status: %s", raw)
		return ok && s.Total == 1 && s.Available == 1, nil
	})
	var to *timeoutError
	if errors.As(err, &to) {
		detail := fmt.Sprintf("%v; last seen: %s%s", err, seen, w.podsOf(ctx, l.lease))
		if applied {
			// berth recorded and applied the version; the cluster's controllers or its
			// (simulated) kubelet did not roll it out.
			return &stallError{detail: detail}
		}
		// A manifest answered 200 that berth does not run is the promise broken.
		return &violation{kind: "manifest answered 200 not running", detail: detail}
	}
	return err
}

// stallError is a version berth applied that the cluster did not roll out in time
// (seen after API-server outages: kwok leaving a pod not ready, the controller
// manager's informers behind its own writes). Not a broken promise of berth's; the
// report counts and lists them.
type stallError struct{ detail string }

func (e *stallError) Error() string { return "applied, not rolled out by the cluster: " + e.detail }

// podsOf describes the lease's pods (image, phase, readiness), for a report.
func (w *world) podsOf(ctx context.Context, id market.LeaseID) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	pods, err := w.cs.CoreV1().Pods(kube.LeaseNamespace(id)).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "; pods: " + err.Error()
	}
	var b bytes.Buffer
	b.WriteString("; pods:")
	for i := range pods.Items {
		p := &pods.Items[i]
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		image := ""
		if len(p.Spec.Containers) > 0 {
			image = p.Spec.Containers[0].Image
		}
		fmt.Fprintf(&b, " %s (%s, %s, ready %t, node %q)", p.Name, image, p.Status.Phase, ready, p.Spec.NodeName)
	}
	if len(pods.Items) == 0 {
		b.WriteString(" none")
	}
	return b.String()
}

// identity is the UIDs of a lease's namespace and workload.
func (w *world) identity(ctx context.Context, id market.LeaseID) (types.UID, types.UID, error) {
	ns := kube.LeaseNamespace(id)
	n, err := w.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("lease %s namespace: %w", id, err)
	}
	d, err := w.cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("lease %s workload: %w", id, err)
	}
	return n.UID, d.UID, nil
}

func (w *world) deploymentExists(ctx context.Context, id market.DeploymentID) (bool, error) {
	var d ledger.DeploymentResponse
	err := ledger.QueryDeployment.Into(ctx, w.client, ledger.DeploymentRequest{ID: id}, &d)
	if errors.Is(err, ledger.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// leaseState reads a lease from the ledger (false when it has none).
func (w *world) leaseState(ctx context.Context, id market.LeaseID) (ledger.Lease, bool, error) {
	var l ledger.LeaseResponse
	err := ledger.QueryLease.Into(ctx, w.client, ledger.LeaseRequest{ID: id}, &l)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Lease{}, false, nil
	}
	return l.Lease, err == nil, err
}

// txOnce has the tenant's message executed once: sent until it lands, through ledger
// restarts; done says whether its effect is there already (an earlier attempt landed
// although its answer was lost).
func (w *world) txOnce(ctx context.Context, msg ledger.Msg, done func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(w.cfg.StepTimeout)
	pause := wait.Backoff{First: 100 * time.Millisecond, Longest: 2 * time.Second}
	for {
		if ok, err := done(ctx); err == nil && ok {
			return nil
		}
		res, err := w.tenant.Broadcast(ctx, msg)
		if err == nil {
			w.log.DebugContext(ctx, "tenant transaction landed", slog.String("msg", fmt.Sprintf("%T", msg)), slog.Int64("height", res.Height))
			return nil
		}
		var lerr *ledger.Error
		if errors.As(err, &lerr) && !errors.Is(err, ledger.ErrWrongSequence) {
			// Refused by the ledger: done or not, it is no outage.
			if ok, derr := done(ctx); derr == nil && ok {
				return nil
			}
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		w.log.InfoContext(ctx, "tenant transaction; retrying", slog.String("msg", fmt.Sprintf("%T", msg)), slog.String("error", err.Error()))
		if !pause.Sleep(ctx) {
			return ctx.Err()
		}
	}
}

// retry runs fn until it succeeds (a part it asks may be restarting), up to the step
// timeout; the ledger's own refusals are not retried.
func (w *world) retry(ctx context.Context, fn func(context.Context) error) error {
	deadline := time.Now().Add(w.cfg.StepTimeout)
	for {
		err := fn(ctx)
		var lerr *ledger.Error
		if err == nil || errors.As(err, &lerr) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !wait.Sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// timeoutError is a wait that ran out.
type timeoutError struct {
	what string
	last error
}

func (e *timeoutError) Error() string {
	if e.last != nil {
		return fmt.Sprintf("timed out waiting for %s (last: %v)", e.what, e.last)
	}
	return "timed out waiting for " + e.what
}

// waitFor polls cond (errors are retried: a part may be restarting) until it holds,
// at every new block or 200 ms.
func (w *world) waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if !wait.Sleep(ctx, 200*time.Millisecond) {
			if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &timeoutError{what: what, last: last}
			}
			return ctx.Err()
		}
	}
}
