package ledger

// Event is one ledger event: its type ("lease.created") and attributes (owner, dseq, …).
type Event struct {
	Type  string            `json:"type"`
	Attrs map[string]string `json:"attributes"`
	// TxIndex is the index in the block of the transaction that emitted the event, or
	// -1 for the block's own events (escrow depletions), which come before the
	// transactions'.
	TxIndex int `json:"tx_index"`
}

// Block is the events of one block, in the order they happened (chain.Feed reads them
// from the node's block results).
type Block struct {
	Height int64   `json:"height"`
	Events []Event `json:"events"`
}
