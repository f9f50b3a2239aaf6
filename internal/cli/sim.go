package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/provider/sim"
)

// Sim runs the simulated provider alone, serving every upstream dialect
// firstword reads.
func Sim(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("sim")
	addr := fs.String("addr", "127.0.0.1:9000", "listen address `HOST:PORT`")
	seed := fs.Uint64("seed", 1, "random `SEED`: the same seed gives the same timings and text")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	p := sim.New(sim.Config{Seed: *seed})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "sim: serving on http://%[1]s: OpenAI (base URL http://%[1]s/v1), Anthropic Messages (http://%[1]s/v1), Responses (http://%[1]s/v1), Gemini (http://%[1]s/v1beta), Ollama (http://%[1]s)\n", ln.Addr())
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
