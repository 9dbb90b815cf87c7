package ledger

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	abci "github.com/cometbft/cometbft/abci/types"

	"berth.dev/berth/internal/market"
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

type events struct{ list []abci.Event }

func (e *events) emit(typ string, kv ...string) {
	ev := abci.Event{Type: typ, Attributes: make([]abci.EventAttribute, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		ev.Attributes = append(ev.Attributes, abci.EventAttribute{Key: kv[i], Value: kv[i+1], Index: true})
	}
	e.list = append(e.list, ev)
}

func deploymentAttrs(id market.DeploymentID, more ...string) []string {
	return append([]string{AttrOwner, id.Owner, AttrDSeq, strconv.FormatUint(id.DSeq, 10)}, more...)
}

func groupAttrs(id market.GroupID, more ...string) []string {
	return deploymentAttrs(id.Deployment(), append([]string{AttrGSeq, strconv.FormatUint(uint64(id.GSeq), 10)}, more...)...)
}

func orderAttrs(id market.OrderID, more ...string) []string {
	return groupAttrs(id.Group(), append([]string{AttrOSeq, strconv.FormatUint(uint64(id.OSeq), 10)}, more...)...)
}

func bidAttrs(id market.BidID, more ...string) []string {
	return orderAttrs(id.Order(), append([]string{AttrProvider, id.Provider}, more...)...)
}

func versionHex(v []byte) string { return hex.EncodeToString(v) }
