package bidengine

import (
	"context"

	"berth.dev/berth/internal/market"
)

// Pricer prices a request (temporary until the script strategy lands).
type Pricer interface {
	Price(ctx context.Context, r Request) (market.DecCoin, error)
}
