package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/market"
)

// Deployer puts leases on the cluster and takes them off: the lease's objects and its
// Manifest resource in, the lease's namespace out.
type Deployer struct {
	cs       kubernetes.Interface
	dc       dynamic.Interface
	settings Settings
	log      *slog.Logger
}

// NewDeployer returns a deployer; it starts nothing.
func NewDeployer(cs kubernetes.Interface, dc dynamic.Interface, s Settings, log *slog.Logger) (*Deployer, error) {
	if cs == nil || dc == nil || log == nil {
		return nil, errors.New("deployer: clients and logger are required")
	}
	return &Deployer{cs: cs, dc: dc, settings: s, log: log}, nil
}

// Deploy applies a lease's manifest group. The lease's namespace and its Manifest
// resource come first, so the record of what the lease must run survives a failure or
// a restart part-way (the manager re-applies from it); then the objects; then the
// Manifest's status says Applied, or Failed with the API server's reason. Applying the
// same group again changes nothing; a new version is applied in place.
func (d *Deployer) Deploy(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes cluster.Routes) error {
	objs, err := BuildLease(id, group, d.settings)
	if err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	// Only the routes the lease holds: a hostname or leased-IP port another of the
	// tenant's deployments has stays there until the tenant migrates it.
	objs.Hosts = slices.DeleteFunc(objs.Hosts, func(h *berthv1.ProviderHost) bool { return !routes.HasHost(h.Spec.Hostname) })
	objs.LeasedIPs = slices.DeleteFunc(objs.LeasedIPs, func(ip *berthv1.ProviderLeasedIP) bool {
		return !routes.HasIP(cluster.IPPort{Endpoint: ip.Spec.Name, Port: uint32(ip.Spec.ExternalPort), Proto: ip.Spec.Protocol}) //nolint:gosec // a port, 1–65535
	})
	m, err := NewManifest(id, version, group, routes)
	if err != nil {
		return err
	}
	if err := Apply(ctx, d.cs, d.dc, &LeaseObjects{Namespace: objs.Namespace}); err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return fmt.Errorf("lease %s: manifest: %w", id, err)
	}
	delete(obj, "status")
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("lease %s: manifest: %w", id, err)
	}
	force := true
	applied, err := d.dc.Resource(ManifestResource).Namespace(m.Namespace).Patch(ctx, m.Name, types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return fmt.Errorf("lease %s: apply manifest resource: %w", id, err)
	}
	if err := Apply(ctx, d.cs, d.dc, objs); err != nil {
		err = fmt.Errorf("lease %s: %w", id, err)
		d.setStatus(ctx, m.Namespace, berthv1.ManifestStatus{ObservedGeneration: applied.GetGeneration(), Phase: PhaseFailed, Message: err.Error()})
		return err
	}
	// Objects of an earlier manifest go once this one is applied. The first manifest
	// has nothing to prune, and one applied before in full (the same generation) has
	// nothing left over: then no list calls are made.
	observed, _, _ := unstructured.NestedInt64(applied.Object, "status", "observedGeneration")
	phase, _, _ := unstructured.NestedString(applied.Object, "status", "phase")
	if observed != 0 && (observed != applied.GetGeneration() || phase != PhaseApplied) {
		if err := Prune(ctx, d.cs, d.dc, objs); err != nil {
			err = fmt.Errorf("lease %s: %w", id, err)
			d.setStatus(ctx, m.Namespace, berthv1.ManifestStatus{ObservedGeneration: observed, Phase: PhaseFailed, Message: err.Error()})
			return err
		}
	}
	d.setStatus(ctx, m.Namespace, berthv1.ManifestStatus{ObservedGeneration: applied.GetGeneration(), Phase: PhaseApplied})
	return nil
}

// Phases a Manifest's status reports.
const (
	PhaseApplied = "Applied" // every object of the current generation was applied
	PhaseFailed  = "Failed"  // the API server refused an object: Message says which and why
)

// setStatus records the outcome on the Manifest's status (best effort: the manager
// reports the same and retries).
func (d *Deployer) setStatus(ctx context.Context, ns string, st berthv1.ManifestStatus) {
	b, err := json.Marshal(map[string]any{"status": st})
	if err == nil {
		_, err = d.dc.Resource(ManifestResource).Namespace(ns).Patch(ctx, ManifestName, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	}
	if err != nil && ctx.Err() == nil {
		d.log.WarnContext(ctx, "manifest status not recorded", slog.String("namespace", ns), slog.String("error", err.Error()))
	}
}

// Teardown stops a lease's workloads and deletes its namespace, and with it every
// object and its Manifest. It returns once the deletions are accepted; a lease with
// nothing on the cluster is not an error.
//
// The workloads go first, with their pods after them through the garbage collector:
// the namespace controller empties namespaces a few at a time, and when many leases
// close at once it reaches some only minutes later. Until then the tenant's pods would
// keep running, and holding capacity, on a lease that has ended.
func (d *Deployer) Teardown(ctx context.Context, id market.LeaseID) error {
	ns := LeaseNamespace(id)
	policy := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &policy}
	ours := metav1.ListOptions{LabelSelector: cluster.LabelManaged + "=true"}
	if err := d.cs.AppsV1().Deployments(ns).DeleteCollection(ctx, del, ours); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: delete deployments in %s: %w", id, ns, err)
	}
	if err := d.cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, del, ours); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: delete statefulsets in %s: %w", id, ns, err)
	}
	err := d.cs.CoreV1().Namespaces().Delete(ctx, ns, del)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: delete namespace %s: %w", id, ns, err)
	}
	return nil
}

// Deployed lists the leases the cluster runs, and the routes each has, from their
// Manifest resources.
func (d *Deployer) Deployed(ctx context.Context) ([]cluster.Deployed, error) {
	ms, err := d.Manifests(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cluster.Deployed, 0, len(ms))
	for _, m := range ms {
		id, version, group, err := ManifestLease(m)
		if err != nil {
			d.log.WarnContext(ctx, "unreadable manifest resource", slog.String("namespace", m.Namespace), slog.String("error", err.Error()))
			continue
		}
		if err := d.restorePasswords(ctx, id, &group); err != nil {
			return nil, err
		}
		out = append(out, cluster.Deployed{Lease: id, Version: version, Group: group, Routes: ManifestRoutes(m)})
	}
	return out, nil
}

// restorePasswords puts back the registry passwords the Manifest resource leaves out,
// from the lease's pull Secrets, so that the lease can be applied again after a
// restart. A Secret that is gone or unreadable leaves the password empty: applying then
// fails with a reported reason rather than running without credentials.
func (d *Deployer) restorePasswords(ctx context.Context, id market.LeaseID, g *market.ManifestGroup) error {
	ns := LeaseNamespace(id)
	for i := range g.Services {
		c := g.Services[i].Credentials
		if c == nil || c.Password != "" {
			continue
		}
		name := g.Services[i].Name + "-pull"
		s, err := d.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.log.WarnContext(ctx, "pull secret gone; the lease cannot be applied again until a manifest arrives",
				slog.String("lease", id.String()), slog.String("secret", ns+"/"+name))
			continue
		case err != nil:
			return fmt.Errorf("lease %s: read pull secret %s: %w", id, name, err)
		}
		var cfg struct {
			Auths map[string]struct {
				Username string `json:"username"`
				Password string `json:"password"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			d.log.WarnContext(ctx, "unreadable pull secret", slog.String("lease", id.String()), slog.String("secret", ns+"/"+name), slog.String("error", err.Error()))
			continue
		}
		if a, ok := cfg.Auths[c.Host]; ok && a.Username == c.Username {
			restored := *c
			restored.Password = a.Password
			g.Services[i].Credentials = &restored
		}
	}
	return nil
}

// Manifests lists every lease's Manifest resource: what the cluster runs, to rebuild
// from after a restart. Manifests that cannot be read are skipped and logged.
func (d *Deployer) Manifests(ctx context.Context) ([]*berthv1.Manifest, error) {
	list, err := d.dc.Resource(ManifestResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	out := make([]*berthv1.Manifest, 0, len(list.Items))
	for i := range list.Items {
		var m berthv1.Manifest
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &m); err != nil {
			d.log.WarnContext(ctx, "unreadable manifest resource", slog.String("namespace", list.Items[i].GetNamespace()), slog.String("error", err.Error()))
			continue
		}
		out = append(out, &m)
	}
	return out, nil
}

// Orphan is a lease namespace whose lease is not active on the ledger.
type Orphan struct {
	Namespace string
	Lease     market.LeaseID
	// Removed is false in a dry run.
	Removed bool
}

// RemoveOrphans deletes the namespaces berth made for leases the ledger no longer
// shows active (with dryRun, only reports them). A namespace whose lease the ledger
// cannot answer for is kept: an outage never removes a lease. Namespaces labelled as
// berth's but naming no lease are reported as an error, not deleted.
func (d *Deployer) RemoveOrphans(ctx context.Context, active cluster.LeaseActive, dryRun bool) ([]Orphan, error) {
	list, err := d.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: cluster.LabelManaged + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list lease namespaces: %w", err)
	}
	var out []Orphan
	var errs []error
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp != nil {
			continue
		}
		id, ok := cluster.LeaseFromLabels(ns.Labels)
		if !ok || LeaseNamespace(id) != ns.Name {
			errs = append(errs, fmt.Errorf("namespace %s is labelled as berth's but names no lease", ns.Name))
			continue
		}
		ok, err := active(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("lease %s: %w", id, err))
			continue
		}
		if ok {
			continue
		}
		o := Orphan{Namespace: ns.Name, Lease: id}
		if !dryRun {
			if err := d.Teardown(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			o.Removed = true
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

var _ cluster.Deployer = (*Deployer)(nil)
