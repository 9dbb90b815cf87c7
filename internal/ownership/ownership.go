// Package ownership is how berth marks what it writes on a cluster: the labels of a
// lease's objects (which lease, which provider, which chain) and Owner, one provider
// on one chain, which selects, recognizes and describes its own objects. Providers
// sharing a cluster find their own objects, and only those, by these labels.
package ownership

import (
	"errors"
	"fmt"
	"strconv"

	"berth.dev/berth/api/market/v1"
)

// Labels on every object berth creates for a lease, so that each can be traced back to
// it (and pods and volumes counted against its reservation), and so that each provider
// sharing a cluster finds its own objects and only those.
const (
	LabelManaged  = "berth.dev/managed" // "true"
	LabelOwner    = "berth.dev/owner"
	LabelDSeq     = "berth.dev/dseq"
	LabelGSeq     = "berth.dev/gseq"
	LabelOSeq     = "berth.dev/oseq"
	LabelProvider = "berth.dev/provider"
	// LabelChainID is the ledger's chain ID: one provider key may serve two chains.
	LabelChainID = "berth.dev/chain-id"
)

// LeaseLabels are the labels of a lease's objects on the cluster of a provider serving
// chain chainID.
func LeaseLabels(id market.LeaseID, chainID string) map[string]string {
	return map[string]string{
		LabelManaged:  "true",
		LabelOwner:    id.Owner,
		LabelDSeq:     strconv.FormatUint(id.DSeq, 10),
		LabelGSeq:     strconv.FormatUint(uint64(id.GSeq), 10),
		LabelOSeq:     strconv.FormatUint(uint64(id.OSeq), 10),
		LabelProvider: id.Provider,
		LabelChainID:  chainID,
	}
}

// LeaseFromLabels reads the lease an object belongs to, if its labels name one
// completely. It says nothing of whose the object is: Owner.LeaseOf does.
func LeaseFromLabels(l map[string]string) (market.LeaseID, bool) {
	if l[LabelManaged] != "true" || l[LabelOwner] == "" || l[LabelProvider] == "" {
		return market.LeaseID{}, false
	}
	dseq, err1 := strconv.ParseUint(l[LabelDSeq], 10, 64)
	gseq, err2 := strconv.ParseUint(l[LabelGSeq], 10, 32)
	oseq, err3 := strconv.ParseUint(l[LabelOSeq], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return market.LeaseID{}, false
	}
	return market.LeaseID{Owner: l[LabelOwner], DSeq: dseq, GSeq: uint32(gseq), OSeq: uint32(oseq), Provider: l[LabelProvider]}, true
}

// Owner is one provider on one chain: whose the objects on a shared cluster are. Every
// object berth writes carries both labels, and everything berth lists, counts, rebuilds
// from or deletes is selected by them, so providers sharing a cluster never touch each
// other's leases.
type Owner struct {
	Provider string
	ChainID  string
}

// Validate checks that both can be label values.
func (o Owner) Validate() error {
	if o.Provider == "" || o.ChainID == "" {
		return errors.New("cluster owner: provider address and chain ID are required")
	}
	for _, v := range []struct{ what, val string }{{"provider address", o.Provider}, {"chain ID", o.ChainID}} {
		if !labelValue(v.val) {
			return fmt.Errorf("cluster owner: %s %q cannot be a Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)", v.what, v.val)
		}
	}
	return nil
}

func labelValue(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

// Selector is the label selector of this owner's objects. Objects of an older berth,
// which carry no chain ID, are selected too; Owns tells them apart.
func (o Owner) Selector() string {
	return LabelManaged + "=true," + LabelProvider + "=" + o.Provider
}

// Owns reports whether labels mark an object as this owner's: berth's, this
// provider's, and this chain's. An object without a chain ID (written before berth
// recorded it) is the provider's; the next apply adds the label.
func (o Owner) Owns(l map[string]string) bool {
	if l[LabelManaged] != "true" || l[LabelProvider] != o.Provider {
		return false
	}
	c, ok := l[LabelChainID]
	return !ok || c == o.ChainID
}

// LeaseOf reads the lease an object of this owner's belongs to; false for objects of
// other providers or chains, and for incomplete labels.
func (o Owner) LeaseOf(l map[string]string) (market.LeaseID, bool) {
	if !o.Owns(l) {
		return market.LeaseID{}, false
	}
	return LeaseFromLabels(l)
}

// LeaseLabels are the labels of one of this owner's leases' objects.
func (o Owner) LeaseLabels(id market.LeaseID) map[string]string { return LeaseLabels(id, o.ChainID) }

// Describe names whose an object is, from its labels, for errors ("provider X on chain
// Y", "not berth's").
func Describe(l map[string]string) string {
	if l[LabelManaged] != "true" {
		return "not berth's"
	}
	p, c := l[LabelProvider], l[LabelChainID]
	if c == "" {
		c = "(unrecorded)"
	}
	return fmt.Sprintf("provider %s on chain %s", p, c)
}
