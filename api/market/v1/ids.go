package market

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DeploymentID names a deployment: its owner's address and a sequence number the owner
// chooses (Akash tools use the block height at creation).
type DeploymentID struct {
	Owner string `json:"owner"`
	DSeq  uint64 `json:"dseq,string"`
}

// GroupID names one group of a deployment; groups are numbered from 1.
type GroupID struct {
	Owner string `json:"owner"`
	DSeq  uint64 `json:"dseq,string"`
	GSeq  uint32 `json:"gseq"`
}

// OrderID names one order of a group; a group gets a new order (OSeq+1) each time it is
// opened again.
type OrderID struct {
	Owner string `json:"owner"`
	DSeq  uint64 `json:"dseq,string"`
	GSeq  uint32 `json:"gseq"`
	OSeq  uint32 `json:"oseq"`
}

// BidID names a provider's bid on an order.
type BidID struct {
	Owner    string `json:"owner"`
	DSeq     uint64 `json:"dseq,string"`
	GSeq     uint32 `json:"gseq"`
	OSeq     uint32 `json:"oseq"`
	Provider string `json:"provider"`
}

// LeaseID names a lease: the bid it was made from.
type LeaseID BidID

// Group returns the ID of group gseq of the deployment.
func (d DeploymentID) Group(gseq uint32) GroupID { return GroupID{d.Owner, d.DSeq, gseq} }

// Deployment returns the group's deployment.
func (g GroupID) Deployment() DeploymentID { return DeploymentID{g.Owner, g.DSeq} }

// Order returns the ID of order oseq of the group.
func (g GroupID) Order(oseq uint32) OrderID { return OrderID{g.Owner, g.DSeq, g.GSeq, oseq} }

// Group returns the order's group.
func (o OrderID) Group() GroupID { return GroupID{o.Owner, o.DSeq, o.GSeq} }

// Bid returns the ID of provider's bid on the order.
func (o OrderID) Bid(provider string) BidID {
	return BidID{o.Owner, o.DSeq, o.GSeq, o.OSeq, provider}
}

// Order returns the bid's order.
func (b BidID) Order() OrderID { return OrderID{b.Owner, b.DSeq, b.GSeq, b.OSeq} }

// Lease returns the ID of the lease made from the bid.
func (b BidID) Lease() LeaseID { return LeaseID(b) }

// Bid returns the bid the lease was made from.
func (l LeaseID) Bid() BidID { return BidID(l) }

// Order returns the lease's order.
func (l LeaseID) Order() OrderID { return BidID(l).Order() }

// Deployment returns the lease's deployment.
func (l LeaseID) Deployment() DeploymentID { return DeploymentID{l.Owner, l.DSeq} }

// IDs print as Akash prints them: the parts joined by "/".
func (d DeploymentID) String() string { return d.Owner + "/" + strconv.FormatUint(d.DSeq, 10) }
func (g GroupID) String() string {
	return g.Deployment().String() + "/" + strconv.FormatUint(uint64(g.GSeq), 10)
}
func (o OrderID) String() string {
	return o.Group().String() + "/" + strconv.FormatUint(uint64(o.OSeq), 10)
}
func (b BidID) String() string   { return b.Order().String() + "/" + b.Provider }
func (l LeaseID) String() string { return BidID(l).String() }

// ErrID reports an ID that does not parse.
var ErrID = errors.New("invalid ID")

// ParseDeploymentID reads "OWNER/DSEQ".
func ParseDeploymentID(s string) (DeploymentID, error) {
	p, err := splitID(s, 2, "OWNER/DSEQ")
	if err != nil {
		return DeploymentID{}, err
	}
	dseq, err := parseSeq(s, "dseq", p[1], 64)
	return DeploymentID{Owner: p[0], DSeq: dseq}, err
}

// ParseGroupID reads "OWNER/DSEQ/GSEQ".
func ParseGroupID(s string) (GroupID, error) {
	p, err := splitID(s, 3, "OWNER/DSEQ/GSEQ")
	if err != nil {
		return GroupID{}, err
	}
	d, err := ParseDeploymentID(p[0] + "/" + p[1])
	if err != nil {
		return GroupID{}, err
	}
	gseq, err := parseSeq(s, "gseq", p[2], 32)
	return d.Group(uint32(gseq)), err //nolint:gosec // parsed with bit size 32
}

// ParseOrderID reads "OWNER/DSEQ/GSEQ/OSEQ".
func ParseOrderID(s string) (OrderID, error) {
	p, err := splitID(s, 4, "OWNER/DSEQ/GSEQ/OSEQ")
	if err != nil {
		return OrderID{}, err
	}
	g, err := ParseGroupID(strings.Join(p[:3], "/"))
	if err != nil {
		return OrderID{}, err
	}
	oseq, err := parseSeq(s, "oseq", p[3], 32)
	return g.Order(uint32(oseq)), err //nolint:gosec // parsed with bit size 32
}

// ParseBidID reads "OWNER/DSEQ/GSEQ/OSEQ/PROVIDER".
func ParseBidID(s string) (BidID, error) {
	p, err := splitID(s, 5, "OWNER/DSEQ/GSEQ/OSEQ/PROVIDER")
	if err != nil {
		return BidID{}, err
	}
	o, err := ParseOrderID(strings.Join(p[:4], "/"))
	if err != nil {
		return BidID{}, err
	}
	return o.Bid(p[4]), nil
}

// ParseLeaseID reads "OWNER/DSEQ/GSEQ/OSEQ/PROVIDER".
func ParseLeaseID(s string) (LeaseID, error) {
	b, err := ParseBidID(s)
	return LeaseID(b), err
}

func splitID(s string, n int, form string) ([]string, error) {
	p := strings.Split(s, "/")
	if len(p) != n {
		return nil, fmt.Errorf("%w %q: want %s", ErrID, s, form)
	}
	for _, part := range p {
		if part == "" {
			return nil, fmt.Errorf("%w %q: empty part (want %s)", ErrID, s, form)
		}
	}
	return p, nil
}

func parseSeq(id, name, s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %s %q is not an unsigned %d-bit number", ErrID, id, name, s, bits)
	}
	return v, nil
}
