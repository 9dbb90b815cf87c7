// Package localenv starts local instances of berth's external dependencies on this
// machine: a private Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and kwok simulating nodes and pods), fake
// nodes with given capacity and GPUs (whose kubelet endpoint serves logs and exec, the
// commands running on this host), redis-server, and an ingress controller (Traefik,
// ingress.go) routing the cluster's Ingresses and Gateway API HTTPRoutes to the
// addresses in their Services' EndpointSlices, and MetalLB's controller (metallb.go)
// giving LoadBalancer Services addresses from IPAddressPools in TEST-NET-1. Tests use
// it through
// internal/testenv; `berth dev` uses it directly.
//
// Everything binds to 127.0.0.1 on free ports and keeps its state in one directory.
// Every child process runs in its own process group and dies with its parent; Stop
// ends the groups, so nothing is left behind. A running control plane watches its
// processes: one that exits unexpectedly is logged with its exit and log tail and
// restarted, or the control plane fails (Failed, Err), as its RestartPolicy says. A ControlPlane or RedisServer is safe for
// concurrent use once started; Stop is idempotent.
//
// A dependency that is not installed is reported as ErrMissingDependency with a
// message saying how to install it.
package localenv
