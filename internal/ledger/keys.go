package ledger

import (
	"encoding/binary"
	"strings"

	"berth.dev/berth/api/market/v1"
)

// State keys: a table name, then the ID parts. Strings end with a 0 byte (addresses and
// denominations never contain one) and numbers are big-endian, so keys sort by ID and a
// prefix of the parts selects a range: all leases of one deployment, all bids of one
// order.
type key struct{ b []byte }

func table(name string) *key { return &key{b: append([]byte(name), '/')} }

func (k *key) str(s string) *key { k.b = append(append(k.b, s...), 0); return k }
func (k *key) u64(v uint64) *key { k.b = binary.BigEndian.AppendUint64(k.b, v); return k }
func (k *key) u32(v uint32) *key { k.b = binary.BigEndian.AppendUint32(k.b, v); return k }
func (k *key) String() string    { return string(k.b) }

// Tables.
const (
	tAccount     = "acct"   // address → account
	tBalance     = "bal"    // address, denom → coin
	tProvider    = "prov"   // owner → provider
	tAudit       = "audit"  // owner, auditor → signed attributes
	tCert        = "cert"   // owner, serial → certificate
	tDeployment  = "depl"   // owner, dseq → deployment
	tGroup       = "group"  // owner, dseq, gseq → group
	tOrder       = "order"  // owner, dseq, gseq, oseq → order
	tOrderState  = "ordst"  // state, order ID → (index)
	tBid         = "bid"    // order ID, provider → bid
	tBidProvider = "bidp"   // provider, order ID → (index)
	tLease       = "lease"  // order ID, provider → lease
	tLeaseProv   = "leasep" // provider, order ID → (index)
	tEscrow      = "escrow" // owner, dseq → escrow account
	tPayment     = "pay"    // order ID, provider → payment
	tDepletion   = "deplete"
)

func accountKey(addr string) string { return table(tAccount).str(addr).String() }
func balanceKey(addr, denom string) string {
	return table(tBalance).str(addr).str(denom).String()
}
func balancePrefix(addr string) string      { return table(tBalance).str(addr).String() }
func providerKey(owner string) string       { return table(tProvider).str(owner).String() }
func auditKey(owner, auditor string) string { return table(tAudit).str(owner).str(auditor).String() }
func auditPrefix(owner string) string       { return table(tAudit).str(owner).String() }
func certKey(owner, serial string) string   { return table(tCert).str(owner).str(serial).String() }
func certPrefix(owner string) string        { return table(tCert).str(owner).String() }

func deploymentKey(id market.DeploymentID) string {
	return table(tDeployment).str(id.Owner).u64(id.DSeq).String()
}
func deploymentPrefix(owner string) string { return table(tDeployment).str(owner).String() }

func groupKey(id market.GroupID) string {
	return table(tGroup).str(id.Owner).u64(id.DSeq).u32(id.GSeq).String()
}
func groupsPrefix(id market.DeploymentID) string {
	return table(tGroup).str(id.Owner).u64(id.DSeq).String()
}

func orderKey(id market.OrderID) string { return orderIDKey(table(tOrder), id) }
func orderIDKey(k *key, id market.OrderID) string {
	return k.str(id.Owner).u64(id.DSeq).u32(id.GSeq).u32(id.OSeq).String()
}
func orderStateKey(state string, id market.OrderID) string {
	return orderIDKey(table(tOrderState).str(state), id)
}
func orderStatePrefix(state string) string { return table(tOrderState).str(state).String() }

func bidKey(id market.BidID) string {
	return orderIDKey(table(tBid), id.Order()) + id.Provider + "\x00"
}
func bidsPrefix(id market.OrderID) string { return orderIDKey(table(tBid), id) }
func bidProviderKey(id market.BidID) string {
	return orderIDKey(table(tBidProvider).str(id.Provider), id.Order())
}
func bidProviderPrefix(provider string) string { return table(tBidProvider).str(provider).String() }

func leaseKey(id market.LeaseID) string {
	return orderIDKey(table(tLease), id.Order()) + id.Provider + "\x00"
}
func leaseProviderKey(id market.LeaseID) string {
	return orderIDKey(table(tLeaseProv).str(id.Provider), id.Order())
}
func leaseProviderPrefix(provider string) string {
	return table(tLeaseProv).str(provider).String()
}
func leasesOfDeploymentPrefix(id market.DeploymentID) string {
	return table(tLease).str(id.Owner).u64(id.DSeq).String()
}

func escrowKey(id market.DeploymentID) string {
	return table(tEscrow).str(id.Owner).u64(id.DSeq).String()
}
func paymentKey(id market.LeaseID) string {
	return orderIDKey(table(tPayment), id.Order()) + id.Provider + "\x00"
}
func paymentsPrefix(id market.DeploymentID) string {
	return table(tPayment).str(id.Owner).u64(id.DSeq).String()
}

// depletionKey indexes escrow accounts by the last height they can pay in full.
func depletionKey(height int64, id market.DeploymentID) string {
	return table(tDepletion).u64(uint64(height)).str(id.Owner).u64(id.DSeq).String() //nolint:gosec // heights are positive
}
func depletionPrefix() string { return table(tDepletion).String() }

func decodeDepletionKey(k string) (market.DeploymentID, int64, bool) {
	rest, ok := strings.CutPrefix(k, depletionPrefix())
	if !ok || len(rest) < 8 {
		return market.DeploymentID{}, 0, false
	}
	h := int64(binary.BigEndian.Uint64([]byte(rest[:8]))) //nolint:gosec // written from a positive height
	owner, seq, ok := strings.Cut(rest[8:], "\x00")
	if !ok || len(seq) != 8 {
		return market.DeploymentID{}, 0, false
	}
	return market.DeploymentID{Owner: owner, DSeq: binary.BigEndian.Uint64([]byte(seq))}, h, true
}

// decodeOrderIDKey reads the order ID at the end of an index key built by orderIDKey
// after prefix.
func decodeOrderIDKey(k, prefix string) (market.OrderID, bool) {
	rest, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return market.OrderID{}, false
	}
	owner, rest, ok := strings.Cut(rest, "\x00")
	if !ok || len(rest) != 16 {
		return market.OrderID{}, false
	}
	b := []byte(rest)
	return market.OrderID{
		Owner: owner,
		DSeq:  binary.BigEndian.Uint64(b[0:8]),
		GSeq:  binary.BigEndian.Uint32(b[8:12]),
		OSeq:  binary.BigEndian.Uint32(b[12:16]),
	}, true
}
