// Package manifest is the provider's manifest service: it decides whether a tenant's
// manifest may run, and hands it to the deployment manager for each of the provider's
// active leases of the deployment.
//
// A manifest is accepted only when its structure is valid (Validate), its version hash
// equals the deployment's current version on the ledger, every service matches its
// group's resource unit (CheckGroup), and its hostnames are neither blocked nor held by
// another deployment. A watchdog closes the bid of a lease that receives no manifest
// within the configured time.
//
// Validate and CheckGroup are pure. Service is safe for concurrent use; its Run loop
// owns the watchdog.
package manifest
