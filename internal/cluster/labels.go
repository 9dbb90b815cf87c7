package cluster

import (
	"strconv"

	"berth.dev/berth/internal/market"
)

// Labels on every object berth creates for a lease, so that each can be traced back to
// it (and pods and volumes counted against its reservation).
const (
	LabelManaged  = "berth.dev/managed" // "true"
	LabelOwner    = "berth.dev/owner"
	LabelDSeq     = "berth.dev/dseq"
	LabelGSeq     = "berth.dev/gseq"
	LabelOSeq     = "berth.dev/oseq"
	LabelProvider = "berth.dev/provider"
)

// LeaseLabels are the labels of a lease's objects.
func LeaseLabels(id market.LeaseID) map[string]string {
	return map[string]string{
		LabelManaged:  "true",
		LabelOwner:    id.Owner,
		LabelDSeq:     strconv.FormatUint(id.DSeq, 10),
		LabelGSeq:     strconv.FormatUint(uint64(id.GSeq), 10),
		LabelOSeq:     strconv.FormatUint(uint64(id.OSeq), 10),
		LabelProvider: id.Provider,
	}
}

// LeaseFromLabels reads the lease an object belongs to, if its labels name one
// completely.
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
