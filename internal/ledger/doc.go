// Package ledger is berth's marketplace: a deterministic state machine run by CometBFT
// as an ABCI application. It owns accounts and balances, providers and their audited
// attributes, certificates, deployments with their groups and orders, bids, leases, and
// the escrow that pays leases from deployment deposits. It mirrors Akash's x/deployment,
// x/market, x/escrow, x/provider, x/audit and x/cert modules.
//
// Its wire contract — transactions, messages, events, queries and result codes — is
// api/ledger/v1, which clients import instead of this package (only the node runs it).
//
// State is an ordered key-value map held in memory and written to a cometbft-db
// database at every commit. The app hash is a homomorphic set hash (LtHash) of every
// entry, kept up to date on each write: O(changes) per block, independent of history,
// so restarted nodes and other validators agree exactly when their states are equal.
//
// Concurrency: see App. Everything else is used from one goroutine at a time.
package ledger
