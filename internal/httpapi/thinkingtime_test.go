package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/metrics"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// TestThinkingMeasured, on a real socket: a model that thinks 100 ms
// before answering is measured as it thought: Server-Timing names the
// first thought, the record has its time to first thought, thinking time
// and reasoning tokens, and the metrics exposition has the thinking
// histograms.
func TestThinkingMeasured(t *testing.T) {
	thinks := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for _, s := range []struct {
				after time.Duration
				chunk chat.Chunk
			}{
				{20 * time.Millisecond, chat.Chunk{Model: "r1", Thinking: "Let me think."}},
				{100 * time.Millisecond, chat.Chunk{Text: "Hello"}},
				{0, chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 40, ReasoningTokens: 38}}},
			} {
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, ctx.Err())
					return
				case <-time.After(s.after):
				}
				if !yield(s.chunk, nil) {
					return
				}
			}
		}
	})
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: thinks}}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	mem := metering.NewMemory(10)
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.Multi{m, mem}}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if st := resp.Header.Get("Server-Timing"); !strings.Contains(st, `first_thought;dur=`) {
		t.Errorf("Server-Timing %q names no first thought", st)
	}
	recs := mem.Recent()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	rec := recs[0]
	if rec.TTFThought < 20*time.Millisecond || rec.TTFThought > rec.TTFW || rec.Thinking < 90*time.Millisecond || rec.Usage.ReasoningTokens != 38 {
		t.Errorf("first thought %v, thinking %v, first word %v, reasoning tokens %d; want ≥ 20ms, ≥ 90ms, after the thought, 38",
			rec.TTFThought, rec.Thinking, rec.TTFW, rec.Usage.ReasoningTokens)
	}
	scrape := httptest.NewRecorder()
	m.Handler().ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`firstword_time_to_first_thought_seconds_count{alias="m",deployment="p/m",status="complete",surface="openai"} 1`,
		`firstword_thinking_seconds_count{alias="m",deployment="p/m",status="complete",surface="openai"} 1`,
		`firstword_tokens_total{alias="m",deployment="p/m",kind="reasoning",part="answer"} 38`,
	} {
		if !strings.Contains(scrape.Body.String(), want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
}
