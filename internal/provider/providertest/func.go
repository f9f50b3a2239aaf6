package providertest

import (
	"context"

	"github.com/firstword/firstword/internal/chat"
)

// Func adapts a function to the provider.Provider interface: a fake
// provider for the tests of the layers above the adapters.
type Func func(ctx context.Context, req *chat.Request) chat.Stream

// Stream calls f.
func (f Func) Stream(ctx context.Context, req *chat.Request) chat.Stream { return f(ctx, req) }
