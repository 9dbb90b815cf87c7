// Package cluster owns what the provider knows about its Kubernetes cluster's capacity
// and what it has promised from it: the inventory (nodes, pods, cluster-wide pools of
// persistent storage, leased IPs and node ports) and the reservations bids and leases
// hold against it (Capacity). The Kubernetes side that feeds the inventory lives in
// internal/cluster/kube; the deployment engine, in internal/deploy. Everything here is
// pure bookkeeping, safe for concurrent use.
package cluster
