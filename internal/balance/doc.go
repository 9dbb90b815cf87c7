// Package balance is the provider's balance checker: it watches the escrow that pays
// our leases, withdraws what they have accrued, keeps the provider's account able to pay
// bid deposits, and records what the provider has earned.
//
// # What a check does
//
// A Checker works in checks, one pass each, every Config.CheckInterval (default 1 m).
// A check reads, in this order and fresh each time (nothing is cached between checks
// but the earnings record):
//
//   - our active leases (QueryLeases by provider, every page), each with its payment
//     settled to the query's height;
//   - the escrow account of every deployment holding one of them (QueryDeployment);
//     its remaining blocks are its balance divided by its rate, the sum of the rates of
//     all its open payments, ours and other providers';
//   - the provider account's balances (QueryAccount).
//
// It then withdraws, with MsgWithdrawLease:
//
//   - every active lease, when Config.WithdrawPeriod (default 1 h; 0 turns it off) has
//     passed since every lease was last withdrawn (recorded in the earnings file, so a
//     restart does not reset it; with nothing recorded, the first check withdraws);
//   - every active lease, when the provider's balance in Config.MinBalance's
//     denomination is below it (default: the ledger's bid_min_deposit, one more bid),
//     so that bids and their deposits can go on;
//   - the leases of every deployment whose escrow pays its leases for fewer than
//     Config.LowFundsBlocks blocks (default 600), so that what it owes us leaves the
//     escrow before the tenant's funds run out.
//
// A lease is withdrawn only when its payment holds at least one whole unit (the ledger
// pays out whole units only): no empty withdrawals. Withdrawals go in as few
// transactions as the ledger allows, up to its max_msgs_per_tx (100) messages each
// (fewer if max_tx_bytes would not hold them), sent one after the other. A
// lease that closes between the listing and the transaction fails the whole
// transaction (invalid_state); the checker then reads each lease of the batch again and
// sends the batch without the ones no longer active, until it succeeds or nothing is
// left: every retry is smaller, so it ends.
//
// A withdrawal transaction, once started, is awaited even when the check's context
// ends (at shutdown; up to a minute, and the broadcaster's inclusion timeout): the
// node may have taken it, and what it paid is then recorded, published and saved
// before Run returns. No further transaction starts after the context has ended.
//
// Ledger errors (a node restarting, a timeout) fail the check: they are logged and
// shown in Status (last_error), berth_balance_last_check_timestamp_seconds stops
// advancing, and the next check starts afresh. Run never returns them.
//
// # Earnings
//
// The earnings record holds, per lease, the total the ledger has paid out to us (its
// payment's Withdrawn) and the lease's state, with a total per denomination and the
// height and time of our last withdrawal. It follows the ledger's truth, never
// estimates of accrual: each check copies Withdrawn from the listed payments; a
// withdrawal adds what the ledger's withdrawal events say it paid; a lease that
// disappears from the active list is read again for its final Withdrawn (the ledger
// pays a lease out when it closes), as is one the app reports with LeaseClosed. The
// first check of Run, and one every hour after it, lists every lease of ours in any
// state, so that leases opened and closed between two checks are counted too. Amounts
// only ever grow (Withdrawn does on the ledger), so updates in any order converge on
// the ledger's values: the totals equal the sum of Withdrawn over our leases. (A
// withdrawal made meanwhile with the same key by another process, such as the CLI, is
// counted at the next check.)
//
// The record is kept in Config.EarningsFile (JSON, written to a temporary file then
// renamed, so a crash leaves the old record or the new one), loaded by New; a file that
// cannot be read or does not add up is an error naming it, never silently replaced.
// Nothing is pruned: closed leases stay in the record.
//
// # Events, metrics, status
//
// Events are published on the bus given to New: "withdrawal" after each withdrawal
// (its leases, what was paid, why), "low_funds" when deployments of ours fall below
// LowFundsBlocks, "low_balance" when the provider's balance falls below MinBalance, and
// "lease_unfunded" when the app reports a lease the ledger closed for insufficient
// funds (the app tears those down; the checker records their final payout).
//
// Metrics: berth_balance_withdrawals_total{outcome}, berth_balance_withdrawn_leases_total,
// berth_balance_earnings{denom}, berth_balance_account{denom}, berth_balance_leases,
// berth_balance_leases_low_funds and berth_balance_last_check_timestamp_seconds.
// Status reports the same for the provider's status endpoint.
//
// # Concurrency
//
// A Checker is safe for concurrent use. Checks and WithdrawAll run one at a time;
// LeaseClosed and Status may be called at any time. Run starts no goroutine.
package balance
