package inventory

import (
	"context"
	"log/slog"
	"sync"

	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/inventory"
)

// forwardToRedis publishes the three topics on Redis (bus.redis) while Run runs;
// stop ends it.
func (c *Controller) forwardToRedis(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	forward := func(run func(context.Context), fwd func(context.Context)) {
		wg.Go(func() { run(ctx) })
		wg.Go(func() { fwd(ctx) })
	}
	pc := redisbus.NewPublisher[inventory.ClusterEvent](c.remote, inventory.TopicCluster)
	forward(pc.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.cluster, pc) })
	pn := redisbus.NewPublisher[inventory.NodeEvent](c.remote, inventory.TopicNodes)
	forward(pn.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.nodeBus, pn) })
	ps := redisbus.NewPublisher[inventory.StorageEvent](c.remote, inventory.TopicStorage)
	forward(ps.Run, func(ctx context.Context) { redisbus.Forward(ctx, c.storage, ps) })
	c.log.InfoContext(ctx, "publishing the inventory topics on Redis", slog.String("channels", c.remote.Channel("inventory.*")))
	return func() {
		cancel()
		wg.Wait()
	}
}
