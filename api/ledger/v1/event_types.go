package ledger

import (
	"errors"
	"fmt"
	"strconv"

	"berth.dev/berth/api/market/v1"
)

// Event types. Every state change emits one; the attributes carry the full IDs of what
// changed (owner, dseq, gseq, oseq, provider as they apply) and the new state's details.
const (
	EventTransfer          = "transfer"
	EventProviderCreated   = "provider.created"
	EventProviderUpdated   = "provider.updated"
	EventAuditSigned       = "audit.signed"
	EventAuditDeleted      = "audit.deleted"
	EventCertCreated       = "cert.created"
	EventCertRevoked       = "cert.revoked"
	EventDeploymentCreated = "deployment.created"
	EventDeploymentUpdated = "deployment.updated"
	EventDeploymentClosed  = "deployment.closed"
	EventDeposit           = "escrow.deposit"
	EventGroupPaused       = "group.paused"
	EventGroupStarted      = "group.started"
	EventGroupClosed       = "group.closed"
	EventGroupUnfunded     = "group.insufficient_funds"
	EventOrderCreated      = "order.created"
	EventOrderClosed       = "order.closed"
	EventBidCreated        = "bid.created"
	EventBidClosed         = "bid.closed"
	EventLeaseCreated      = "lease.created"
	EventLeaseClosed       = "lease.closed"
	EventWithdrawal        = "withdrawal"
)

// Event attribute keys.
const (
	AttrOwner    = "owner"
	AttrDSeq     = "dseq"
	AttrGSeq     = "gseq"
	AttrOSeq     = "oseq"
	AttrProvider = "provider"
	AttrState    = "state"
	AttrReason   = "reason"
	AttrPrice    = "price"
	AttrAmount   = "amount"
	AttrVersion  = "version"
	AttrFrom     = "from"
	AttrTo       = "to"
	AttrAuditor  = "auditor"
	AttrSerial   = "serial"
	AttrHostURI  = "host_uri"
)

// OrderOfEvent reads the order an event's attributes name (owner, dseq, gseq, oseq):
// the events of orders, bids and leases.
func OrderOfEvent(attrs map[string]string) (market.OrderID, error) {
	dseq, err1 := strconv.ParseUint(attrs[AttrDSeq], 10, 64)
	gseq, err2 := strconv.ParseUint(attrs[AttrGSeq], 10, 32)
	oseq, err3 := strconv.ParseUint(attrs[AttrOSeq], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil {
		return market.OrderID{}, fmt.Errorf("the event names no order: %w", err)
	}
	if attrs[AttrOwner] == "" {
		return market.OrderID{}, errors.New("the event names no order: no owner")
	}
	return market.OrderID{Owner: attrs[AttrOwner], DSeq: dseq, GSeq: uint32(gseq), OSeq: uint32(oseq)}, nil
}

// LeaseOfEvent reads the bid or lease an event's attributes name (the order's and the
// provider): the events of bids, leases and withdrawals.
func LeaseOfEvent(attrs map[string]string) (market.LeaseID, error) {
	o, err := OrderOfEvent(attrs)
	if err != nil {
		return market.LeaseID{}, err
	}
	if attrs[AttrProvider] == "" {
		return market.LeaseID{}, errors.New("the event names no lease: no provider")
	}
	return o.Bid(attrs[AttrProvider]).Lease(), nil
}
