package market

// SignedBy lists the auditors whose signatures on provider attributes an order
// requires: all of AllOf and at least one of AnyOf.
type SignedBy struct {
	AllOf []string `json:"all_of"`
	AnyOf []string `json:"any_of"`
}

// PlacementRequirements are what a provider must satisfy to bid on a group.
type PlacementRequirements struct {
	Attributes Attributes `json:"attributes"`
	SignedBy   SignedBy   `json:"signed_by"`
}

// ResourceUnit is a resource shape, how many replicas of it, and the maximum price per
// block the tenant pays for each replica.
type ResourceUnit struct {
	Count     uint32    `json:"count"`
	Price     DecCoin   `json:"price"`
	Resources Resources `json:"resource"`
}

// GroupSpec is one deployment group as the ledger records it: placement requirements
// and resource units. Each group becomes one order, and one lease per provider.
type GroupSpec struct {
	Name         string                `json:"name"`
	Requirements PlacementRequirements `json:"requirements"`
	Resources    []ResourceUnit        `json:"resources"`
}
