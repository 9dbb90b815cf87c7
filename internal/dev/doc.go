// Package dev is `berth dev`: a local ledger, a simulated cluster (the real
// Kubernetes control plane with kwok's nodes), MetalLB's controller, and the provider
// and its three operators, in one process or (--redis) as processes of their own over
// a redis-server, ready for a tenant. It builds them from app's components as an
// operator would configure them, and stops all it started before Run returns.
package dev
