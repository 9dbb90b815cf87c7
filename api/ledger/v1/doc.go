// Package ledger is the wire contract of berth's ledger (internal/ledger runs it): what
// its clients — the provider, the CLI, internal/chain — send and read, with no part of
// the state machine or of CometBFT's node.
//
//   - Transactions: JSON, signed over the exact body bytes (SignDomain, SignTx,
//     DecodeTx), one canonical encoding; messages (Msg…) with their checks.
//   - Queries: typed descriptors (QueryBid, QueryLeases, …: Query[Req, Resp]) run
//     through any Querier (chain.Client), and List for every page of a list query.
//   - Events: types (Event…) and attribute keys (Attr…) with the full IDs of what
//     changed; OrderOfEvent and LeaseOfEvent read them back.
//   - Result codes (Code…, Error, a sentinel per code for errors.Is), the chain's
//     parameters and genesis, addresses and keys.
package ledger
