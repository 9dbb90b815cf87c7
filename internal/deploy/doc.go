// Package deploy is the provider's deployment engine: it keeps the cluster running
// what every lease of the provider's must run. Manager is level-triggered (a work
// queue keyed by lease, each sync converging the lease's objects through a Deployer,
// drift repaired, failures retried with backoff, closed leases torn down, everything
// rebuilt from the recorded manifests after a restart); it accepts manifests
// (ManifestReceived, holding the leases' locks while it checks hostnames and records
// them), routes hostnames and leased IPs (Routes), and closes leases that stay
// unhealthy (UnhealthyCloser). Its vocabulary (LeaseStatus, log and event streams,
// exec requests) is what the Kubernetes adapter (internal/cluster/kube) reports and
// the gateway serves. Capacity bookkeeping is internal/cluster's.
package deploy
