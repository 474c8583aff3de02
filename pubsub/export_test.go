package pubsub

import "context"

// Flush does the background work queued so far (unsubscribing channels
// whose waiters left, settling channels whose subscription is in doubt)
// and returns once it is done, or was done by the background goroutine.
func Flush(ctx context.Context, h *Hub) error { return h.settle(ctx) }
