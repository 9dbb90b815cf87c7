package ledger

import (
	"encoding/hex"
	"strconv"

	abci "github.com/cometbft/cometbft/abci/types"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

type events struct{ list []abci.Event }

func (e *events) emit(typ string, kv ...string) {
	ev := abci.Event{Type: typ, Attributes: make([]abci.EventAttribute, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		ev.Attributes = append(ev.Attributes, abci.EventAttribute{Key: kv[i], Value: kv[i+1], Index: true})
	}
	e.list = append(e.list, ev)
}

func deploymentAttrs(id market.DeploymentID, more ...string) []string {
	return append([]string{api.AttrOwner, id.Owner, api.AttrDSeq, strconv.FormatUint(id.DSeq, 10)}, more...)
}

func groupAttrs(id market.GroupID, more ...string) []string {
	return deploymentAttrs(id.Deployment(), append([]string{api.AttrGSeq, strconv.FormatUint(uint64(id.GSeq), 10)}, more...)...)
}

func orderAttrs(id market.OrderID, more ...string) []string {
	return groupAttrs(id.Group(), append([]string{api.AttrOSeq, strconv.FormatUint(uint64(id.OSeq), 10)}, more...)...)
}

func bidAttrs(id market.BidID, more ...string) []string {
	return orderAttrs(id.Order(), append([]string{api.AttrProvider, id.Provider}, more...)...)
}

func versionHex(v []byte) string { return hex.EncodeToString(v) }
